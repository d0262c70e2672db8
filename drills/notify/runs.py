"""Notices about runs: a drill or an incident started and finished, an incident declared."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from drills.notify.deliver import notify
from drills.notify.events import EventKind, Notice, Severity
from drills.plan import DrillPlan
from drills.store.details import FailbackRecord, StuckRecord
from drills.timefmt import duration

WHAT = {"incident": "incident takeover", "failback": "failback", "practice": "practice"}


def _seconds(value: float | None) -> str:
    return duration(value)


def run_started(plan: str, run_id: str, mode: str, operator: str, reason: str) -> Notice:
    what = WHAT.get(mode, "drill")
    changed = [f"{what} run {run_id} started by {operator}"]
    if reason:
        changed.append(f"reason: {reason}")
    return Notice(
        EventKind.RUN_STARTED,
        plan,
        f"{plan}: {what} started (run {run_id})",
        tuple(changed),
        Severity.INFO if mode in ("drill", "practice") else Severity.WARNING,
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
    what = WHAT.get(mode, "drill")
    known = [v for v in rpo_s.values() if v is not None]
    worst_rpo = max(known) if known else None
    changed = [
        f"{what} run {run_id} ended {status}, verdict {verdict or '—'}",
        f"RTO {_seconds(rto_s)} (target {duration(rto_target_s)})",
        f"RPO {_seconds(worst_rpo)} (target {duration(rpo_target_s)})",
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


def incident_failed_back(
    plan: str, incident_id: str, run_id: str, record: FailbackRecord, *, drift: bool
) -> Notice:
    copied = sum(d.written_at_dr for d in record.datasets)
    changed = [
        f"failback run {run_id} brought incident {incident_id} home to the primary",
        f"downtime {_seconds(record.downtime_seconds)} from the DR writers' stop",
        f"{copied} object(s) written at DR, every one readable at the primary",
    ]
    if drift:
        changed.append("the state differs from the one before the incident: see the report")
    return Notice(
        EventKind.INCIDENT_FAILED_BACK,
        plan,
        f"{plan}: incident {incident_id} failed back (run {run_id})",
        tuple(changed),
        Severity.WARNING if drift else Severity.SUCCESS,
        (f"See the run's report: `drills report {run_id}`.",) if drift else (),
        "history",
        {
            "incident_run": incident_id,
            "failback_run": run_id,
            "downtime_seconds": record.downtime_seconds,
            "objects_copied_back": copied,
            "drift": drift,
        },
    )


def incident_closed(plan: str, incident_id: str, *, by: str, run_id: str | None) -> Notice:
    return Notice(
        EventKind.INCIDENT_CLOSED,
        plan,
        f"{plan}: incident {incident_id} closed ({by})",
        (f"incident {incident_id} closed by {by}" + (f" (run {run_id})" if run_id else ""),),
        Severity.INFO,
        (),
        "history",
        {"incident_run": incident_id, "closed_by": by, "run_id": run_id},
    )


def announce_incident_closed(
    plan: DrillPlan,
    incident_id: str,
    *,
    by: str,
    run_id: str | None,
    record: FailbackRecord | None = None,
    drift: bool = False,
) -> None:
    """Tell people an incident ended: failed back (with its downtime and data), and closed."""
    notices = [incident_closed(plan.name, incident_id, by=by, run_id=run_id)]
    if record is not None and run_id is not None:
        notices.insert(0, incident_failed_back(plan.name, incident_id, run_id, record, drift=drift))
    notify(notices, plan)


def run_orphaned(plan: str, run_id: str, mode: str, outcome: str, error: str | None) -> Notice:
    """A run whose orchestrator died, and what recover-orphans made of it."""
    incident = mode == "incident"
    what = WHAT.get(mode, "drill")
    changed = [f"{what} run {run_id} lost its orchestrator (its lease expired): {outcome}"]
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
    plan: DrillPlan | str, run_id: str, mode: str, outcome: str, error: str | None
) -> None:
    """``plan`` is its name alone when its file cannot be loaded: DRILLS_NOTIFY is told still."""
    name = plan if isinstance(plan, str) else plan.name
    notify(
        [run_orphaned(name, run_id, mode, outcome, error)], None if isinstance(plan, str) else plan
    )


def incident_stuck(plan: str, run_id: str, stuck: StuckRecord, *, retried: bool = False) -> Notice:
    """An incident held part-way when a deadline passed: the state, and what continues it."""
    where = "still stuck after recover-orphans retried it" if retried else "stuck: held"
    changed = [
        f"incident takeover run {run_id} {where}",
        f"state: {stuck.state}",
        f"error: {stuck.error}",
    ]
    return Notice(
        EventKind.INCIDENT_STUCK,
        plan,
        f"{plan}: incident {run_id} stuck"
        + ("" if stuck.serving else ": no site serving")
        + f"; `{stuck.command}` continues it",
        tuple(changed),
        Severity.FAILURE,
        (
            f"Continue it: `{stuck.command}`"
            + (
                " (recover-orphans retries this every minute). "
                if stuck.auto_retry
                else " once its cause is fixed (a refusal: nothing retries it by itself). "
            )
            + f"To keep it as it is instead: `drills recover {run_id} --hold`.",
        ),
        "history",
        {
            "run_id": run_id,
            "mode": "incident",
            "serving": stuck.serving,
            "dns": stuck.dns,
            "dns_values": list(stuck.dns_values),
            "endpoints": dict(stuck.endpoints),
            "command": stuck.command,
            "auto_retry": stuck.auto_retry,
            "retried": retried,
        },
    )


def announce_stuck(plan: DrillPlan, run_id: str, stuck: StuckRecord, *, retried: bool) -> None:
    """Tell every notifier that an incident is held part-way, and what continues it."""
    notify([incident_stuck(plan.name, run_id, stuck, retried=retried)], plan)
