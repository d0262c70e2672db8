"""Whether the history store's tamper-evident chain verifies (drills.store.chain), in words."""

from __future__ import annotations

from drills.evidence.coverage import ChainStatus
from drills.store.chain_verify import verify_store
from drills.store.history import HistoryStore


def chain_status(store: HistoryStore) -> ChainStatus:
    """The chain's verdict over ``store``: the first problem in words, and every plan with one."""
    report = verify_store(store)
    pre = report.pre_chain
    before = f"; {pre} record(s) sealed when the store was upgraded (pre-chain)" if pre else ""
    first = report.first_problem
    if first is None:
        return ChainStatus(True, f"the history verifies ({report.links} links){before}")
    broken: dict[str, str] = {}
    for problem in report.problems:
        broken.setdefault(problem.plan, problem.describe())
    more = f" ({len(report.problems)} problems in all)" if len(report.problems) > 1 else ""
    return ChainStatus(False, f"the history does NOT verify: {first.describe()}{more}", broken)
