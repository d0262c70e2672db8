"""Notices about runs: a drill or an incident started and finished, an incident declared."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from drills.notify.deliver import notify
from drills.notify.events import EventKind, Notice, Severity
from drills.plan import DrillPlan
from drills.plan.durations import format_duration


def _seconds(value: float | None) -> str:
    return "—" if value is None else format_duration(round(value, 1))


def run_started(plan: str, run_id: str, mode: str, operator: str, reason: str) -> Notice:
    what = "incident takeover" if mode == "incident" else "drill"
    changed = [f"{what} run {run_id} started by {operator}"]
    if reason:
        changed.append(f"reason: {reason}")
    return Notice(
        EventKind.RUN_STARTED,
        plan,
        f"{plan}: {what} started (run {run_id})",
        tuple(changed),
        Severity.WARNING if mode == "incident" else Severity.INFO,
        (),
        "history",
        {"run_id": run_id, "mode": mode, "operator": operator},
    )


def run_finished(
    plan: str,
    run_id: str,
    mode: str,
    *,
    status: str,
    verdict: str | None,
    rto_s: float | None,
    rto_target_s: float,
    rpo_s: Mapping[str, float | None],
    rpo_target_s: float,
    error: str | None,
) -> Notice:
    what = "incident takeover" if mode == "incident" else "drill"
    known = [v for v in rpo_s.values() if v is not None]
    worst_rpo = max(known) if known else None
    changed = [
        f"{what} run {run_id} ended {status}, verdict {verdict or '—'}",
        f"RTO {_seconds(rto_s)} (target {format_duration(rto_target_s)})",
        f"RPO {_seconds(worst_rpo)} (target {format_duration(rpo_target_s)})",
    ]
    changed += [f"RPO of {name}: {_seconds(value)}" for name, value in sorted(rpo_s.items())]
    remediation: tuple[str, ...] = ()
    if error:
        changed.append(f"error: {error}")
        remediation = (f"See the run's report: `drills report {run_id}`.",)
    ok = status == "succeeded" and verdict in (None, "met")
    return Notice(
        EventKind.RUN_FINISHED,
        plan,
        f"{plan}: {what} {status}, verdict {verdict or '—'} (run {run_id})",
        tuple(changed),
        Severity.SUCCESS if ok else Severity.FAILURE,
        remediation,
        "history",
        {
            "run_id": run_id,
            "mode": mode,
            "status": status,
            "verdict": verdict,
            "rto_seconds": rto_s,
            "rto_target_seconds": rto_target_s,
            "rpo_seconds": dict(rpo_s),
            "rpo_target_seconds": rpo_target_s,
        },
    )


def incident_declared(
    plan: str, operator: str, reason: str, declared_at: dt.datetime, flow_run_id: str | None
) -> Notice:
    changed = [
        f"incident declared by {operator} at {declared_at.isoformat(timespec='seconds')} (T0)",
        f"reason: {reason}",
    ]
    if flow_run_id:
        changed.append(f"takeover flow run {flow_run_id} started")
    return Notice(
        EventKind.INCIDENT_DECLARED,
        plan,
        f"{plan}: incident declared by {operator}",
        tuple(changed),
        Severity.FAILURE,
        ("Follow the takeover on the dashboard; the primary is fenced before DR serves.",),
        "declare",
        {"operator": operator, "declared_at": declared_at.isoformat(), "flow_run_id": flow_run_id},
    )


def announce_start(
    plan: DrillPlan, run_id: str, mode: str, operator: str, reason: str, *, dry_run: bool
) -> None:
    """Tell people a drill or incident run started (a dry run changes nothing: no message)."""
    if not dry_run:
        notify([run_started(plan.name, run_id, str(mode), operator, reason)], plan)


def announce_finish(
    plan: DrillPlan,
    run_id: str,
    mode: str,
    *,
    status: str,
    verdict: str | None,
    rto_s: float | None,
    rpo_s: Mapping[str, float | None],
    error: str | None,
    dry_run: bool,
) -> None:
    """Tell people how a run ended: its verdict, RTO and RPO against the plan's objectives."""
    if dry_run:
        return
    notice = run_finished(
        plan.name, run_id, str(mode), status=str(status),
        verdict=str(verdict) if verdict is not None else None, rto_s=rto_s,
        rto_target_s=plan.objectives.rto, rpo_s=rpo_s, rpo_target_s=plan.objectives.rpo,
        error=error,
    )  # fmt: skip
    notify([notice], plan)


def announce_incident(
    plan_name: str,
    plan_path: str,
    operator: str,
    reason: str,
    declared_at: dt.datetime,
    flow_run_id: str | None,
) -> None:
    """Tell people an incident was declared; the plan's targets are read in the background."""
    notice = incident_declared(plan_name, operator, reason, declared_at, flow_run_id)
    notify([notice], plan_path)


def run_orphaned(plan: str, run_id: str, mode: str, outcome: str, error: str | None) -> Notice:
    """A run whose orchestrator died, and what recover-orphans made of it."""
    incident = mode == "incident"
    changed = [f"{'incident takeover' if incident else 'drill'} run {run_id} lost its "
               f"orchestrator (its lease expired): {outcome}"]  # fmt: skip
    if error:
        changed.append(f"error: {error}")
    remediation = (
        (f"Decide: `drills recover {run_id} --complete` to finish the takeover, or keep it "
         "held; it is never failed back automatically.",)
        if incident
        else (f"See the run's report: `drills report {run_id}`.",)
    )  # fmt: skip
    return Notice(
        EventKind.RUN_ORPHANED,
        plan,
        f"{plan}: run {run_id} lost its orchestrator: {outcome}",
        tuple(changed),
        Severity.FAILURE if incident or error else Severity.WARNING,
        remediation,
        "history",
        {"run_id": run_id, "mode": mode, "outcome": outcome},
    )


def announce_orphan(
    plan: DrillPlan, run_id: str, mode: str, outcome: str, error: str | None
) -> None:
    notify([run_orphaned(plan.name, run_id, mode, outcome, error)], plan)
