"""A drill run rendered for an auditor: who, when, what changed, how long, objectives met.

The same report backs `drills report`, the Prefect artifact and the dashboard's
downloads, so the three can never disagree.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict
from typing import Any

from drills.store.detection_chain import chain_markdown, detection_chain_of, detection_seconds
from drills.store.history import HistoryStore
from drills.store.incident_record import incident_markdown, incident_record
from drills.store.kinds import Mode, RunStatus
from drills.store.models import DrillRun
from drills.store.report_slo import load_markdown, slo_markdown
from drills.store.validation_report import validation_jobs_markdown
from drills.text import for_markdown, for_terminal
from drills.timefmt import duration, moment


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value else None


def report_data(run: DrillRun, store: HistoryStore) -> dict[str, Any]:
    details = run.details
    measurement = details.measurement
    return {
        "run": {
            "id": run.id,
            "plan": run.plan,
            "application": details.application,
            "plan_digest": run.plan_digest,
            "mode": run.mode,
            "dry_run": run.dry_run,
            "operator": run.operator,
            "reason": run.reason,
            "status": run.status,
            "verdict": run.verdict,
            "started_at": _iso(run.started_at),
            "t0": _iso(run.t0),
            "restored_at": _iso(run.restored_at),
            "finished_at": _iso(run.finished_at),
            "flow_run_id": run.flow_run_id,
            "error": run.error,
        },
        # As recorded: a run's measurement may predate some of today's fields.
        "measurement": measurement.model_dump(mode="json", exclude_unset=True)
        if measurement
        else None,
        "rto_seconds": run.rto_seconds,
        "forecast": details.forecast.model_dump(mode="json") if details.forecast else None,
        "client_rto_seconds": run.client_rto_seconds,
        "full_capacity_seconds": details.full_capacity_seconds,
        "preemption_seconds": run.preemption_seconds,
        "carry_seconds": run.carry_seconds,
        "capacity": measurement.capacity if measurement else details.capacity,
        "rpo_seconds": run.rpo_seconds,
        "approval": asdict(details.approval) if details.approval else None,
        "unfenced": details.unfenced,
        "phases": run.timeline,
        "journal": [entry.to_json() for entry in store.journal(run.id)],
        "planned_changes": details.planned,
        "state_differences": details.drift,
        "readiness": run.readiness,
        "incident": incident_record(run, store),
        "gates": details.gates,
        "detected_at": _iso(details.detection.detected_at) if details.detection else None,
        "detection": details.detection.model_dump(mode="json") if details.detection else None,
        "detection_seconds": detection_seconds(run),
        "detection_chain": detection_chain_of(run),
        "slo": details.slo,
        "load": details.load,
        "validation_jobs": [job.model_dump(mode="json") for job in details.validation_jobs],
    }


def _secs(value: float | None) -> str:
    return duration(value)


def _text(value: object) -> str:
    """Free text (an operator's reason, a server's error) as inert Markdown."""
    return for_markdown(str(value))


def _code(value: object) -> str:
    """A value shown as code: a backtick in it would end the span early."""
    return "`" + for_terminal(str(value)).replace("`", "'") + "`"


# A practice proves DR comes up, not that the primary can be fenced and the record moved.
PRACTICE_CADENCE_LINE = (
    "- **Cadence:** a practice never fences the primary nor switches the production "
    "record, so it does not count for the quarterly drill cadence (drill.cadence)."
)


def render_markdown(data: dict[str, Any]) -> str:
    """The run as Markdown. Everything that came from outside the code (plan names,
    people's words, servers' answers) goes through _text or _code, so a report can't
    be made to draw a table or a verdict of its own."""
    lines = [
        *_summary(data),
        *_objectives(data),
        *slo_markdown(data.get("slo") or []),
        *load_markdown(data.get("load")),
        *chain_markdown(data.get("detection_chain") or []),
        *incident_markdown(data.get("incident")),
        *validation_jobs_markdown(data.get("validation_jobs") or []),
        *_phases(data["phases"] or []),
        *_journal(data["journal"]),
        *_intended_changes(data["planned_changes"]),
        *_state_after_the_drill(data),
        *_gates(data.get("gates") or []),
        *_readiness(data.get("readiness") or {}),
    ]
    return "\n".join(lines) + "\n"


def _summary(data: dict[str, Any]) -> list[str]:
    run = data["run"]
    lines = [
        f"# Drill report {_code(run['id'])} — plan {_code(run['plan'])}",
        "",
        f"- **Mode:** {run['mode']}{' (dry run)' if run['dry_run'] else ''}",
        *_application(run.get("application")),
        f"- **Operator:** {_text(run['operator'])} — **reason:** {_text(run['reason'] or '—')}",
        f"- **Started:** {moment(run['started_at'])} — **T0:** {moment(run['t0'])}"
        f" — **finished:** {moment(run['finished_at']) if run['finished_at'] else 'unfinished'}",
        f"- **Status:** {run['status']} — **verdict:** **{run['verdict'] or '—'}**",
        f"- **Plan digest:** {_code(run['plan_digest'])}",
    ]
    if run.get("error"):
        lines.append(f"- **Error:** {_text(run['error'])}")
    if data.get("approval"):
        lines.append(_approval(data["approval"]))
    if data.get("unfenced"):
        lines.append("- **WARNING:** the primary was unreachable and was NOT fenced (forced).")
    if run["mode"] == Mode.PRACTICE:
        lines.append(PRACTICE_CADENCE_LINE)
    return lines


def _application(name: str | None) -> list[str]:
    """The application a run was restricted to; nothing for a run of the whole plan."""
    if not name:
        return []
    return [f"- **Application:** {_code(name)} only (`--only`): its workloads, datasets and "
            "DNS records, with those no application lists"]  # fmt: skip


def _approval(a: dict[str, Any]) -> str:
    answer = "approved" if a["approved"] else "refused"
    return f"- **Approval:** {answer} by {_text(a['approver'])}: {_text(a['comment'])}"


def _objectives(data: dict[str, Any]) -> list[str]:
    m = data.get("measurement") or {}
    lines = ["", "## Objectives", "", "| measure | value | target |", "|---|---|---|"]
    lines.append(f"| RTO | {_secs(data['rto_seconds'])} | {_secs(m.get('rto_target_seconds'))} |")
    lines.append(
        f"| client-visible RTO (incl. old TTL) | {_secs(data['client_rto_seconds'])} | — |"
    )
    # The normal tier comes up after the service is restored: not an objective, a fact.
    lines.append(
        f"| full capacity (normal tier ready) | {_secs(data.get('full_capacity_seconds'))} | — |"
    )
    # GPUs taken back from DR's low-priority work, within the bring-up: a fact, no target.
    lines.append(
        f"| GPUs taken back at DR (preemption) | {_secs(data.get('preemption_seconds'))} | — |"
    )
    capacity = data.get("capacity")
    if capacity:
        carry = _secs(data.get("carry_seconds"))
        lines.append(f"| carry (DR runs the target's replicas) | {carry} | — |")
    for name, lag in (data.get("rpo_seconds") or {}).items():
        lines.append(f"| RPO {_code(name)} | {_secs(lag)} | {_secs(m.get('rpo_target_seconds'))} |")
    return lines + _forecast_line(data.get("forecast")) + _capacity(capacity)


def _capacity(capacity: dict[str, Any] | None) -> list[str]:
    """What DR carries of the primary's demand at T0, service by service."""
    if not capacity:
        return []
    lines = ["", "## Capacity", "", _text(capacity.get("summary", "")), "",
             "| service | demand at T0 | needed | reached | carried | target |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for row in capacity.get("services") or []:
        demand = "unknown" if row.get("demand") is None else f"{row['demand']:.3g} {row['unit']}"
        percent = row.get("percent_carried")
        carried = "unknown" if percent is None else f"{percent:.3g}%"
        lines.append(
            f"| {_code(row['service'])} | {_text(demand)} | {row.get('needed') or '?'} | "
            f"{row.get('reached')} | {carried} | {row.get('target_percent'):g}% |"
        )
    return lines


def _forecast_line(f: dict[str, Any] | None) -> list[str]:
    if not f or f.get("rto_seconds") is None:
        return []
    low, high = (f.get("interval") or [None, None])[:2]
    return [
        "",
        f"Forecast before the drill: RTO {_secs(f['rto_seconds'])} ({_secs(low)}–{_secs(high)}; "
        f"{_text(f.get('basis', ''))}); error {_secs(f.get('error_seconds'))}, "
        f"{'inside' if f.get('inside_interval') else 'outside'} the interval.",
    ]


def _phases(phases: list[dict[str, Any]]) -> list[str]:
    lines = ["", "## Phases", "", "| phase | status | duration |", "|---|---|---|"]
    for phase in phases:
        lines.append(f"| {phase['name']} | {phase['status']} | {_secs(phase['seconds'])} |")
    for phase in phases:
        if phase["steps"]:
            lines += _phase_steps(phase)
    return lines


def _phase_steps(phase: dict[str, Any]) -> list[str]:
    lines = ["", f"### {phase['name']}", ""]
    for step in phase["steps"]:
        result = f": {_text(step['result'])}" if step["result"] else ""
        lines.append(
            f"- {_code(step['status'])} {for_terminal(step['name'])} "
            f"({_secs(step['seconds'])}){result}"
        )
        if step.get("waits"):  # a target that did not answer, retried until the deadline
            lines.append(f"  - waited {step['waits']} time(s); last: {_text(step['waiting'])}")
    return lines


def _journal(entries: list[dict[str, Any]]) -> list[str]:
    lines = ["", "## Changes (journal)", ""]
    if not entries:
        return [*lines, "No change was made."]
    lines += ["| # | change | target | original → intended | state |", "|---|---|---|---|---|"]
    for c in entries:
        lines.append(
            f"| {c['seq']} | {c['change']} | {_code(c['target'])} | "
            f"{_code(_change(c['original'], c['intended']))} | {c['state']} |"
        )
    return lines


def _typed(value: object) -> str:
    """A recorded value as a person reads it: ``replicas 1``, ``a, b``, never a repr."""
    if value is None:
        return "—"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_typed(v)}" for k, v in value.items()) or "nothing"
    if isinstance(value, list | tuple):
        return ", ".join(_typed(v) for v in value) or "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _change(original: object, intended: object) -> str:
    """``replicas 0 → 1``: what changed, field by field when both sides name the same ones."""
    if (
        isinstance(original, dict)
        and isinstance(intended, dict)
        and original.keys() == intended.keys()
    ):
        return (
            ", ".join(f"{k} {_typed(original[k])} → {_typed(intended[k])}" for k in original)
            or "nothing"
        )
    return f"{_typed(original)} → {_typed(intended)}"


def _intended_changes(planned: list[str]) -> list[str]:
    if not planned:
        return []
    return ["", "## Intended changes (dry run)", "", *[f"- {_text(p)}" for p in planned]]


def _state_after_the_drill(data: dict[str, Any]) -> list[str]:
    if not _put_back_after_changes(data["run"]):
        return []
    diff = data["state_differences"]
    if diff is None:
        # The rollback failed before the state could be compared with the snapshot.
        said = "**Not verified** against the snapshot taken before the drill."
    elif not diff:
        said = "Identical to the snapshot taken before the drill."
    else:
        said = f"**{len(diff)} difference(s)** from the snapshot: {_text(diff)}"
    return ["", "## State after the drill", "", said]


def _put_back_after_changes(run: dict[str, Any]) -> bool:
    # Only then is there a state to hold against the snapshot: an incident stays at DR,
    # and a dry run or an aborted drill never changed anything.
    return Mode(run["mode"]).rehearsal and not run["dry_run"] and run["status"] != RunStatus.ABORTED


def _gates(gates: list[dict[str, Any]]) -> list[str]:
    if not gates:
        return []
    lines = ["", "## Gates at the start", "", "| gate | state | detail |", "|---|---|---|"]
    for g in gates:
        lines.append(f"| {g['kind']} {_code(g['name'])} | {g['state']} | {_text(g['detail'])} |")
    return lines


def _readiness(readiness: dict[str, Any]) -> list[str]:
    if not readiness.get("results"):
        return []
    lines = ["", "## Readiness at T0", "", "| check | status | summary |", "|---|---|---|"]
    for r in readiness["results"]:
        lines.append(f"| {_code(r['id'])} | {r['status']} | {_text(r['summary'])} |")
    return lines
