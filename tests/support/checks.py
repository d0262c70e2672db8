"""Running one check the way the readiness runner does, for the check tests, and what the
drifted lab makes fail."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from drills.checks.base import CheckFunc, CheckRegistry, CheckResult, Placement
from drills.checks.catalog import load_checks
from drills.checks.checkup import check_context
from drills.checks.runner import run_one
from drills.plan import DrillPlan
from drills.store.history import HistoryStore
from drills.targets.sites import Targets


def catalogued_check(
    registry: CheckRegistry, id: str, *, title: str, category: str, timeout_s: float
) -> Callable[[CheckFunc], CheckFunc]:
    """Register a check of a test's own registry, with the catalogue text every check needs."""
    return registry.check(
        id,
        title=title,
        category=category,
        timeout_s=timeout_s,
        reads="Nothing outside the test.",
        blocks="When the test makes it.",
        warns="Never.",
        remediation="None: it is a test's check.",
    )


def run_check(
    plan: DrillPlan,
    check_id: str,
    *,
    history: HistoryStore | None = None,
    now: dt.datetime | None = None,
    key: bytes | None = None,
    placement: Placement | None = None,
) -> CheckResult:
    spec = load_checks().get(check_id)
    with Targets(plan) as targets:
        context = check_context(
            plan, targets, history, now=now, fingerprint_key=key, placement=placement
        )
        return run_one(spec, context)


# What `drills lab up --drift` seeds that a readiness check can see, as the docs' "Readiness
# checks" says. (The DR deployment that never becomes ready is a runtime fault: only a
# drill finds it.)
DRIFT_FAILURES = frozenset(
    {
        "images.synced",
        "data.replicated",
        "data.rpo",
        "data.checkpoint_fresh",
        "secrets.synced",
        "dns.ttl",
    }
)


# The seven checks of readiness v2: would the workloads actually schedule and write at DR?
V2_CHECKS = (
    "cluster.device_plugin",
    "cluster.queue_quota",
    "cluster.resource_quota",
    "cluster.priority_classes",
    "cluster.schedulable",
    "data.dr_writable",
    "cluster.sentinel",
)

# What `drills lab up --drift-scheduling` fails, as the docs' "Readiness checks" says; the
# forecast warns beside them that a takeover started now would not complete.
SCHEDULING_DRIFT_FAILURES = frozenset(
    {
        "cluster.device_plugin",
        "cluster.queue_quota",
        "cluster.schedulable",
        "cluster.priority_classes",
        # The LLM server's taint and queue leave DR no room to grow to the primary's demand.
        "capacity.carry",
    }
)
SCHEDULING_DRIFT_WARNINGS = frozenset({"forecast.rto"})

# A DNS section that validates and is never contacted: for plans of tests about other targets.
UNUSED_DNS = {
    "provider": "rfc2136",
    "servers": ["127.0.0.1:5353"],
    "zone": "drills.test.",
    "tsig": {"name": "k", "secret": "env:DRILLS_TEST_TSIG"},
    "record": {"name": "api.drills.test.", "type": "A"},
    "primary_value": "127.0.0.2",
    "dr_value": "127.0.0.3",
}


def drilled_days_ago(url: str, plan: str, days: float) -> None:
    """A successful drill of ``plan`` ``days`` ago, recorded (and sealed in the evidence
    chain) as the store records one: a run written around the store is tampering, which
    every command refuses on opening it."""
    from drills.store.models import DrillRun

    when = dt.datetime.now(dt.UTC) - dt.timedelta(days=days)
    history = HistoryStore(url)
    try:
        history.create_run(
            DrillRun(
                id=f"seeded-{plan}", plan=plan, plan_digest="seeded", mode="drill",
                dry_run=False, operator="tests", reason="seeded history", status="succeeded",
                started_at=when, t0=when, restored_at=when, finished_at=when,
            )
        )  # fmt: skip
    finally:
        history.close()
