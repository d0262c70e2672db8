"""Undo a takeover in the one order that never lets both sites serve at once.

DNS goes back first, then DR returns to standby and is verified from outside
to have stopped serving, and only then is the primary reopened. The failback
of a drill, the rollback after a failure and `drills recover` all use this.
"""

from __future__ import annotations

import time

from drills.plan import DrillPlan
from drills.takeover.journal import Change
from drills.takeover.steps.executor import ChangeExecutor
from drills.takeover.steps.phases import shown_waits, wait_endpoint
from drills.takeover.timeline import Timeline


def _is_dns(change: Change) -> bool:
    return change.kind in ("dns.record", "dns.name")  # the production name, a practice name


def _at_dr(change: Change) -> bool:
    return change.target.startswith("dr/")


def safe_rollback(
    executor: ChangeExecutor, plan: DrillPlan, timeline: Timeline, *, deadline_s: float = 60.0
) -> list[Change]:
    """Undo in the safe order; a target that fails for now (a stalled API, a DNS server
    not answering) is retried until ``deadline_s``, the rollback's own deadline."""
    deadline = time.monotonic() + deadline_s
    undone: list[Change] = []
    with timeline.step("switch DNS back") as step:
        undone += executor.rollback(_is_dns, deadline=deadline, on_wait=shown_waits(timeline, step))
        step.evidence = {"undone": [c.target for c in undone]}
    with timeline.step("return DR to standby") as step:
        dr = executor.rollback(_at_dr, deadline=deadline, on_wait=shown_waits(timeline, step))
        undone += dr
        step.evidence = {"undone": [c.target for c in dr]}
    with timeline.step("verify DR stopped serving") as step:
        step.result = wait_endpoint(
            str(plan.sites.dr.endpoint), serving_wanted=False,
            deadline_s=max(1.0, deadline - time.monotonic()),
        )  # fmt: skip
    with timeline.step("reopen primary and restore writers") as step:
        primary = executor.rollback(deadline=deadline, on_wait=shown_waits(timeline, step))
        undone += primary
        step.evidence = {"undone": [c.target for c in primary]}
    return undone


def wait_primary_serves(plan: DrillPlan, timeline: Timeline, *, deadline_s: float) -> None:
    """After a failback: the primary reopened, verified from outside."""
    with timeline.step("primary serves again") as step:
        step.result = wait_endpoint(
            str(plan.sites.primary.endpoint), serving_wanted=True, deadline_s=deadline_s
        )
