"""Which readiness changes deserve a message: compare this snapshot with the previous one.

A check that starts failing is told once, and once more when it passes again; nothing
is said while it stays failing, except an optional reminder every ``remind_after``
seconds (``DRILLS_NOTIFY_REMIND``). The drill cadence has notices of its own (a drill
due within 14 days, a drill overdue), each sent once when the state is entered.

Everything works on the stored form of a readiness report (``ReadinessReport.to_json()``
plus the ``failing_since`` map this module adds), so the previous run's state is
whatever the history store kept, and nothing else is remembered between runs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from drills.notify.events import EventKind, Notice, Severity

FAILING = frozenset({"fail", "error"})
CADENCE_CHECK = "drill.cadence"
DUE_SOON_DAYS = 14.0
# Stored beside the report in each snapshot: when each failing check started failing.
FAILING_SINCE = "failing_since"

Report = Mapping[str, Any]


@dataclass(frozen=True)
class ReadinessChanges:
    notices: tuple[Notice, ...]
    failing_since: dict[str, str] = field(default_factory=dict)


def _results(report: Report | None) -> dict[str, Mapping[str, Any]]:
    if not report:
        return {}
    return {r["id"]: r for r in report.get("results", ()) if isinstance(r, Mapping)}


def _failing(result: Mapping[str, Any] | None) -> bool:
    return result is not None and result.get("status") in FAILING


def _line(result: Mapping[str, Any]) -> str:
    flag = " (BLOCKING)" if result.get("blocking") else ""
    return f"{result['id']}: {result.get('status')}{flag}: {result.get('summary', '')}"


def _remedies(results: list[Mapping[str, Any]]) -> tuple[str, ...]:
    return tuple(f"{r['id']}: {r['remediation']}" for r in results if r.get("remediation"))


def _checked_at(report: Report) -> dt.datetime:
    return dt.datetime.fromisoformat(str(report["checked_at"]))


def readiness_changes(
    plan: str,
    previous: Report | None,
    current: Report,
    *,
    remind_after: float | None = None,
) -> ReadinessChanges:
    """The notices for ``current`` given the ``previous`` stored snapshot (None: the first)."""
    before, now = _results(previous), _results(current)
    now_at = _checked_at(current)
    failing_since = _failing_since(previous, now, now_at)
    watched = [cid for cid in now if cid != CADENCE_CHECK]
    started = [now[c] for c in watched if _failing(now[c]) and not _failing(before.get(c))]
    recovered = [now[c] for c in watched if not _failing(now[c]) and _failing(before.get(c))]
    notices: list[Notice] = []
    if started or recovered:
        notices.append(_changed(plan, started, recovered, now))
    if remind_after and previous is not None:
        due = [
            now[c]
            for c in watched
            if _failing(now[c])
            and _failing(before.get(c))
            and _reminder_due(failing_since[c], _checked_at(previous), now_at, remind_after)
        ]
        if due:
            notices.append(_reminder(plan, due, failing_since))
    cadence = _cadence_notice(plan, before.get(CADENCE_CHECK), now.get(CADENCE_CHECK))
    if cadence is not None:
        notices.append(cadence)
    return ReadinessChanges(tuple(notices), failing_since)


def _failing_since(
    previous: Report | None, now: Mapping[str, Mapping[str, Any]], now_at: dt.datetime
) -> dict[str, str]:
    """When each failing check started failing: carried from the previous snapshot while it
    keeps failing (a snapshot stored before this map existed counts from its own time)."""
    before = _results(previous)
    kept: Mapping[str, str] = (previous or {}).get(FAILING_SINCE) or {}
    since: dict[str, str] = {}
    for cid, result in now.items():
        if not _failing(result):
            continue
        if previous is not None and _failing(before.get(cid)):
            since[cid] = kept.get(cid) or _checked_at(previous).isoformat()
        else:
            since[cid] = now_at.isoformat()
    return since


def _changed(
    plan: str,
    started: list[Mapping[str, Any]],
    recovered: list[Mapping[str, Any]],
    now: Mapping[str, Mapping[str, Any]],
) -> Notice:
    still = sorted(c for c, r in now.items() if _failing(r) and c != CADENCE_CHECK)
    changed = [f"now failing: {_line(r)}" for r in started]
    changed += [f"back to {r.get('status')}: {r['id']}" for r in recovered]
    if started:
        ids = ", ".join(r["id"] for r in started)
        title = f"{plan}: readiness failing: {ids}"
        blocking = any(r.get("blocking") for r in started)
        severity = Severity.FAILURE if blocking else Severity.WARNING
    else:
        ids = ", ".join(r["id"] for r in recovered)
        title = f"{plan}: readiness back to pass: {ids}"
        severity = Severity.SUCCESS if not still else Severity.INFO
    if recovered and still:
        changed.append(f"still failing: {', '.join(still)}")
    payload = {
        "failing": [r["id"] for r in started],
        "passing": [r["id"] for r in recovered],
        "blocking": [r["id"] for r in started if r.get("blocking")],
        "still_failing": still,
        "checks": {
            r["id"]: {"status": r.get("status"), "blocking": bool(r.get("blocking"))}
            for r in [*started, *recovered]
        },
    }
    return Notice(
        EventKind.READINESS_CHANGED, plan, title, tuple(changed), severity,
        _remedies(started), "readiness", payload,
    )  # fmt: skip


def _reminder_due(since: str, previous_at: dt.datetime, now_at: dt.datetime, every: float) -> bool:
    """True when a multiple of ``every`` since the check started failing was crossed
    between the previous run and this one: one reminder per period, whatever the cadence."""
    start = dt.datetime.fromisoformat(since)
    periods_then = (previous_at - start).total_seconds() // every
    periods_now = (now_at - start).total_seconds() // every
    return periods_now > periods_then and periods_now >= 1


def _reminder(plan: str, due: list[Mapping[str, Any]], since: Mapping[str, str]) -> Notice:
    ids = ", ".join(r["id"] for r in due)
    return Notice(
        EventKind.READINESS_REMINDER,
        plan,
        f"{plan}: readiness still failing: {ids}",
        tuple(f"still failing since {since[r['id']]}: {_line(r)}" for r in due),
        Severity.WARNING,
        _remedies(due),
        "readiness",
        {"failing": [r["id"] for r in due], "since": {r["id"]: since[r["id"]] for r in due}},
    )


def cadence_state(result: Mapping[str, Any] | None) -> str:
    """``overdue``, ``due`` (within 14 days), ``ok`` or ``unknown``, from drill.cadence."""
    if result is None or result.get("status") not in ("pass", "fail"):
        return "unknown"
    evidence = result.get("evidence") or {}
    due_in = evidence.get("due_in_days")
    if due_in is None:  # never drilled: it fails without a date
        return "overdue" if result.get("status") == "fail" else "unknown"
    if due_in < 0 or result.get("status") == "fail":
        return "overdue"
    return "due" if due_in <= DUE_SOON_DAYS else "ok"


def _cadence_notice(
    plan: str, before: Mapping[str, Any] | None, now: Mapping[str, Any] | None
) -> Notice | None:
    state = cadence_state(now)
    if now is None or state not in ("due", "overdue") or state == cadence_state(before):
        return None
    evidence = now.get("evidence") or {}
    due_in = evidence.get("due_in_days")
    if state == "due":
        kind, severity = EventKind.DRILL_DUE, Severity.INFO
        title = f"{plan}: a drill is due within {due_in:g} days"
    else:
        kind, severity = EventKind.DRILL_OVERDUE, Severity.WARNING
        title = f"{plan}: a drill is overdue"
    remediation = (f"{CADENCE_CHECK}: {now['remediation']}",) if now.get("remediation") else (
        "Run a drill of this plan before it is overdue: its scheduled Prefect deployment, "
        "or `drills run`.",
    )  # fmt: skip
    return Notice(
        kind, plan, title, (f"{CADENCE_CHECK}: {now.get('summary', '')}",), severity,
        remediation, "history",
        {"state": state, "due_in_days": due_in, "last_run_id": evidence.get("last_run_id")},
    )  # fmt: skip
