"""Running one check the way the readiness runner does, for the check tests."""

from __future__ import annotations

import datetime as dt

from drills.checks.base import REGISTRY, CheckResult
from drills.checks.catalog import load_checks
from drills.checks.readiness import check_context
from drills.checks.runner import run_one
from drills.plan import DrillPlan
from drills.store.history import HistoryStore
from drills.targets.sites import Targets


def run_check(
    plan: DrillPlan,
    check_id: str,
    *,
    history: HistoryStore | None = None,
    now: dt.datetime | None = None,
    key: bytes | None = None,
) -> CheckResult:
    load_checks()
    with Targets(plan) as targets:
        context = check_context(plan, targets, history, now=now, fingerprint_key=key)
        return run_one(REGISTRY.get(check_id), context)


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
