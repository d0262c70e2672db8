"""One incident, from declaration to close: its takeover run and its failback run, read as one.

The runs stay two records (each sealed in the evidence chain); their RunDetails link
them (``incident.failback_run`` on the incident, ``incident.incident_run`` on the
failback). This reads the pair back as the incident's lifecycle: declared, taken over,
held at DR, the way back checked, failed back, closed; the time served from DR; the
data written at DR and copied back.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from drills.store.history import HistoryStore
from drills.store.kinds import Mode
from drills.store.models import DrillRun
from drills.timefmt import duration, moment


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value else None


def _way_back_checked(failback: DrillRun | None) -> str | None:
    checked = (failback.readiness or {}).get("checked_at") if failback else None
    return str(checked) if checked else None


def incident_record(run: DrillRun, store: HistoryStore) -> dict[str, Any] | None:
    """The incident ``run`` belongs to (an incident, or the failback of one); None for a
    drill, a dry run, or a failback that names no incident."""
    if run.dry_run or Mode(run.mode).rehearsal:
        return None
    incident, failback = run, None
    link = run.details.incident
    if run.mode == Mode.FAILBACK:
        found = store.get_run(link.incident_run) if link and link.incident_run else None
        if found is None:
            return None
        incident, failback = found, run
        link = found.details.incident
    elif link and link.failback_run:
        failback = store.get_run(link.failback_run)
    closed = link.closed_at if link else None
    taken_over = incident.restored_at
    back = failback.restored_at if failback else None
    served_until = back or closed or dt.datetime.now(dt.UTC)
    record = failback.details.failback if failback else None
    datasets = [d.model_dump(mode="json") for d in record.datasets] if record else []
    return {
        "incident_run": incident.id,
        "failback_run": failback.id if failback else None,
        "declared": _iso(incident.t0),
        "taken_over": _iso(taken_over),
        "held_from": _iso(taken_over),
        "way_back_checked": _way_back_checked(failback),
        "failed_back": _iso(back),
        "closed": _iso(closed),
        "closed_by": link.closed_by if link else None,
        "open": closed is None,
        "served_from_dr_seconds": round((served_until - taken_over).total_seconds(), 3)
        if taken_over
        else None,
        "failback_downtime_seconds": record.downtime_seconds if record else None,
        "written_at_dr": sum(d["written_at_dr"] for d in datasets),
        "copied_back": sum(d["written_at_dr"] for d in datasets if not d["missing_at_primary"]),
        "datasets": datasets,
    }


def incident_markdown(record: dict[str, Any] | None) -> list[str]:
    if record is None:
        return []
    closed = record["closed"]
    rows = (
        ("declared (T0)", moment(record["declared"])),
        ("taken over", moment(record["taken_over"])),
        ("way back checked", moment(record["way_back_checked"])),
        ("failed back", moment(record["failed_back"])),
        ("closed", f"{moment(closed)} ({record['closed_by']})" if closed else moment(None)),
    )
    lines = ["", "## Incident record", "", "| moment | when |", "|---|---|"]
    lines += [f"| {what} | {when} |" for what, when in rows]
    served = record["served_from_dr_seconds"]
    lines += [
        "",
        f"- **Incident run:** `{record['incident_run']}` — **failback run:** "
        f"`{record['failback_run'] or '—'}` — **{'open' if record['open'] else 'closed'}**",
        f"- **Served from DR:** {duration(served)}" + (" (still)" if record["open"] else ""),
        f"- **Written at DR:** {record['written_at_dr']} object(s); "
        f"**copied back and readable at the primary:** {record['copied_back']}",
    ]
    if record["failback_downtime_seconds"] is not None:
        lines.append(f"- **Failback downtime** (from the DR writers' stop): "
                     f"{duration(record['failback_downtime_seconds'])}")  # fmt: skip
    return lines


__all__ = ["incident_markdown", "incident_record"]
