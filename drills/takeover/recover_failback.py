"""`drills recover` of a failback that died: which way it goes, and going there.

Before its DNS switch a failback is undone, newest change first, and DR serves
exactly as before it (compared with the snapshot the failback took before its first
change). From the switch on it only goes forward: its phases are walked again (what
is done is skipped), then the state is compared with the one before the incident,
and the incident is closed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from drills.errors import DrillError
from drills.store.history import HistoryStore
from drills.store.models import DrillRun
from drills.takeover.failback import close_incident, incident_goal
from drills.takeover.journal import Journal
from drills.takeover.snapshot import differences, take
from drills.takeover.steps.executor import ChangeExecutor
from drills.takeover.steps.failback import (
    FailbackContext,
    complete_forward,
    dns_switched_back,
    undo_before_dns,
)
from drills.takeover.steps.phases import PhaseContext

if TYPE_CHECKING:
    from drills.takeover.recover_report import Action, RecoverReport


def failback_action(action: Action | None, journal: Journal) -> Literal["rollback", "complete"]:
    """Forward once the DNS switch was reached (or asked for), else back to DR."""
    switched = dns_switched_back(journal.changes())
    if action in ("hold", "fail-back"):
        raise DrillError("a failback is undone before its DNS switch and completed after it")
    if action == "rollback" and switched:
        raise DrillError("this failback switched DNS back already: it can only be completed")
    return "complete" if switched or action == "complete" else "rollback"


def recover_failback(
    history: HistoryStore,
    report: RecoverReport,
    executor: ChangeExecutor,
    run: DrillRun,
    deadline_s: float,
) -> None:
    plan, targets = executor.targets.plan, executor.targets
    link = run.details.incident
    incident = history.get_run(link.incident_run) if link and link.incident_run else None
    if incident is None:
        raise DrillError(f"failback run {run.id} names no incident it was bringing home")
    base = PhaseContext(
        plan, targets, executor, report.timeline, tier_deadline_s=deadline_s,
        fence_deadline_s=deadline_s, dns_deadline_s=deadline_s,
    )  # fmt: skip
    ctx = FailbackContext.of(base, incident_t0=incident.t0, sync_deadline_s=deadline_s)
    if report.action == "complete":
        ctx.goal = incident_goal(history, incident, ctx)
        complete_forward(ctx)
        report.drift = _compare(report, ctx.goal, take(plan, targets), "before the incident")
        if not report.drift:
            # As a failback that ends closes it: on both runs, and announced.
            link = close_incident(history, plan, incident.id, by="failback", run_id=run.id)
            now = history.get_run(run.id) or run
            history.update_run(run.id, details=now.details.model_copy(update={"incident": link}))
        return
    undone = undo_before_dns(executor, ctx, report.timeline)
    report.undone = [c.target for c in undone]
    before = run.details.snapshot_before or {}
    report.drift = _compare(report, before, take(plan, targets), "before the failback")
    if not before and undone:
        raise DrillError(f"run {run.id} has changes but no snapshot to verify against")


def _compare(report: RecoverReport, before: dict, now: dict, what: str) -> dict:
    with report.timeline.step(f"compare with the state {what}") as step:
        drift = differences(before, now) if before else {}
        step.evidence = {"differences": drift}
        step.result = "identical" if not drift else f"{len(drift)} difference(s)"
        return drift


__all__ = ["failback_action", "recover_failback"]
