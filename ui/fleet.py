"""The fleet overview's rows and calendar, from the store's facts and the plans: no Streamlit.

A row per plan file, problems first; a calendar of the drills the plans schedule in the
coming weeks, with the windows that overlap on a cluster two plans share flagged.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from drills.capacity import DrFigures
from drills.checks import MAX_DRILL_AGE_DAYS
from drills.plan import DrillPlan, cluster_of, next_fire_times
from drills.store import PlanFacts

FORECAST_CHECK = "forecast.rto"
CARRY_CHECK = "capacity.carry"
STALE_READINESS = dt.timedelta(hours=24)
CADENCE_WARN_DAYS = 14
CALENDAR_DAYS = 35
DRILL_WINDOW = dt.timedelta(hours=1)  # a drill's window when none was timed yet


@dataclass(frozen=True)
class FleetRow:
    plan: str
    problems: tuple[str, ...]  # worst first; empty: nothing to look at
    serving: str
    readiness: str  # ready, warn, blocked, not checked, invalid
    blocking: int | None
    readiness_at: dt.datetime | None
    last_drill_at: dt.datetime | None
    last_verdict: str | None
    last_rto: float | None
    rto_target: float | None
    next_drill: dt.datetime | None
    cadence_days_left: float | None
    open_findings: int
    forecast_rto: float | None
    dr_cost: str = "—"  # the standby's cost a month (dr_cost_text)
    dr_can_carry: str = "—"  # from the newest readiness's capacity.carry (dr_carry_text)

    @property
    def severity(self) -> int:
        return sum(_weight(p) for p in self.problems)


def _forecast(report: Mapping[str, Any] | None) -> float | None:
    for result in (report or {}).get("results") or ():
        if result.get("id") == FORECAST_CHECK:
            value = (result.get("evidence") or {}).get("rto_seconds")
            return float(value) if isinstance(value, int | float) else None
    return None


def _readiness_word(facts: PlanFacts) -> str:
    snapshot = facts.readiness
    if snapshot is None:
        return "not checked"
    if snapshot.blocking:
        return "blocked"
    return "ready" if snapshot.ok else "warn"


# How much each kind of problem weighs when ordering rows: what stops a takeover first.
WEIGHTS = {"invalid": 1000, "blocking": 100, "last drill": 50, "drill overdue": 40,
           "never checked": 30, "forecast": 30, "serving": 20, "readiness stale": 10,
           "open finding": 5, "drill due soon": 5}  # fmt: skip


def _problems(row: dict[str, Any], now: dt.datetime) -> tuple[str, ...]:
    found = []
    if row["blocking"]:
        found.append(f"{row['blocking']} blocking")
    if row["readiness"] == "not checked":
        found.append("never checked")
    elif row["readiness_at"] and now - row["readiness_at"] > STALE_READINESS:
        found.append("readiness stale")
    if row["last_verdict"] in ("failed", "missed", "not met", "aborted"):
        found.append(f"last drill {row['last_verdict']}")
    left = row["cadence_days_left"]
    if left is None or left < 0:
        found.append("drill overdue")
    elif left < CADENCE_WARN_DAYS:
        found.append("drill due soon")
    target, forecast = row["rto_target"], row["forecast_rto"]
    if forecast is not None and target is not None and forecast > target:
        found.append("forecast over RTO")
    if row["open_findings"]:
        found.append(f"{row['open_findings']} open finding(s)")
    if row["serving"] != "primary":
        found.append(f"serving: {row['serving']}")
    return tuple(sorted(found, key=lambda p: -_weight(p)))


def _weight(problem: str) -> int:
    return max((w for word, w in WEIGHTS.items() if word in problem), default=1)


# Cell colours a person reads before the words: red stops a takeover or is overdue, orange
# wants a look, blue is production away from home.
RED, ORANGE, BLUE, GREEN = (
    "background-color: #ffcdd2; color: #b71c1c; font-weight: 600",
    "background-color: #ffe0b2; color: #8a4b00",
    "background-color: #bbdefb; color: #0d47a1; font-weight: 600",
    "color: #1b5e20",
)
READINESS_STYLE = {"blocked": RED, "invalid": RED, "warn": ORANGE, "not checked": ORANGE,
                   "ready": GREEN}  # fmt: skip
SERVING_STYLE = {"dr": BLUE, "in-transition": ORANGE, "primary": GREEN}
VERDICT_STYLE = {"failed": RED, "missed": RED, "not met": RED, "aborted": ORANGE, "met": GREEN}


def _cadence_style(value: str) -> str:
    if value.startswith("overdue") or value == "no success yet":
        return RED
    return ""


def _problems_style(value: str) -> str:
    if value == "—":
        return ""
    return (
        RED if any(w in value for w in ("blocking", "invalid", "overdue", "last drill")) else ORANGE
    )


def fleet_style(frame: Any) -> Any:
    """The Fleet table (a DataFrame) coloured: blocked, warn, serving from DR, overdue."""
    return (
        frame.style.map(lambda v: READINESS_STYLE.get(v, ""), subset=["readiness"])
        .map(lambda v: SERVING_STYLE.get(v, ""), subset=["serving"])
        .map(lambda v: VERDICT_STYLE.get(v, ""), subset=["verdict"])
        .map(_cadence_style, subset=["cadence limit in"])
        .map(_problems_style, subset=["problems"])
        .map(_carry_style, subset=["DR can carry"])
    )


def _carry_style(value: str) -> str:
    if value == "yes":
        return GREEN
    return RED if value.startswith("no") else ORANGE if value != "—" else ""


def dr_carry_text(plan: DrillPlan, report: Mapping[str, Any] | None) -> str:
    """Whether DR can carry the plan's measured demand, as the newest readiness found it: '—'
    for a plan that measures none; an errored check is "unknown", never a yes."""
    if not plan.demand:
        return "—"
    result = next(
        (r for r in (report or {}).get("results") or () if r.get("id") == CARRY_CHECK), None
    )
    if result is None:
        return "not checked"
    services = (result.get("evidence") or {}).get("services") or []
    missing = sum(int(s.get("gpus_missing") or 0) for s in services)
    status = result.get("status")
    if status == "pass":
        return "yes"
    if status in ("fail", "warn") and missing:
        return f"no: {missing} GPUs missing"
    return f"unknown: the check {'errored' if status == 'error' else status}"


def dr_cost_text(plan: DrillPlan, figures: DrFigures | None) -> str:
    """The DR standby's cost a month for the Fleet table: '—' for a plan without a cost
    section, and never a blank that could read as free."""
    if plan.cost is None:
        return "—"
    if figures is None:
        return "not measured yet"
    if figures.cost_per_month is None or not figures.currency:
        return "unpriced GPU nodes"
    return f"{figures.currency} {figures.cost_per_month:,.0f}"


def fleet_row(
    plan: DrillPlan,
    facts: PlanFacts,
    next_drill: dt.datetime | None,
    now: dt.datetime,
    dr: DrFigures | None = None,
) -> FleetRow:
    drill, success = facts.last_drill, facts.last_success
    proved = (success.finished_at or success.started_at) if success else None
    report = facts.readiness.report if facts.readiness else None
    row: dict[str, Any] = {
        "plan": plan.name,
        "serving": facts.serving,
        "readiness": _readiness_word(facts),
        "blocking": facts.readiness.blocking if facts.readiness else None,
        "readiness_at": facts.readiness.checked_at if facts.readiness else None,
        "last_drill_at": drill.started_at if drill else None,
        "last_verdict": drill.verdict if drill else None,
        "last_rto": drill.rto_seconds if drill else None,
        "rto_target": (drill.rto_target if drill else None) or plan.objectives.rto,
        "next_drill": next_drill,
        "cadence_days_left": (
            MAX_DRILL_AGE_DAYS - (now - proved).total_seconds() / 86400 if proved else None
        ),
        "open_findings": facts.open_findings,
        "forecast_rto": _forecast(report),
    }
    return FleetRow(
        problems=_problems(row, now),
        dr_cost=dr_cost_text(plan, dr),
        dr_can_carry=dr_carry_text(plan, report),
        **row,
    )


def invalid_row(name: str, problems: int) -> FleetRow:
    return FleetRow(
        name, (f"invalid plan ({problems} problem(s))",), "—", "invalid", None, None, None,
        None, None, None, None, None, 0, None,
    )  # fmt: skip


def sort_rows(rows: Sequence[FleetRow]) -> list[FleetRow]:
    """Problems first (the most first), then by name."""
    return sorted(rows, key=lambda r: (-r.severity, r.plan))


def planned_drills(
    plan: DrillPlan, now: dt.datetime, days: int = CALENDAR_DAYS
) -> list[dt.datetime]:
    """The drills the plan's own schedule fires in the next ``days``, in UTC."""
    if plan.schedule is None:
        return []
    zone = ZoneInfo(plan.schedule.timezone)
    local = now.astimezone(zone)
    until = now + dt.timedelta(days=days)
    times = next_fire_times(
        plan.schedule.cron, local.replace(tzinfo=zone), 64, within_days=days + 1
    )
    return [t.astimezone(dt.UTC) for t in times if t.astimezone(dt.UTC) <= until]


@dataclass(frozen=True)
class Window:
    plan: str
    start: dt.datetime
    end: dt.datetime
    clusters: frozenset[str]
    overlaps: tuple[str, ...] = ()  # plans whose windows overlap this one on a shared cluster


@dataclass(frozen=True)
class Blocked:
    """One opening of a plan's blocked window (gates.blocked_windows), in UTC."""

    plan: str
    name: str
    start: dt.datetime
    end: dt.datetime


def blocked_windows(plan: DrillPlan, now: dt.datetime, days: int = CALENDAR_DAYS) -> list[Blocked]:
    """The plan's change freezes open now or in the next ``days``: drills and practices
    are refused in them, scheduled ones skipped."""
    until = now + dt.timedelta(days=days)
    found = []
    for window in plan.gates.blocked_windows:
        zone = ZoneInfo(window.timezone)
        if window.cron is not None and window.duration is not None:
            length = dt.timedelta(seconds=window.duration)
            local = now.astimezone(zone).replace(tzinfo=None) - length
            for t in next_fire_times(window.cron, local, 64, within_days=days + length.days + 2):
                start = t.replace(tzinfo=zone).astimezone(dt.UTC)
                if start <= until and start + length > now:
                    found.append(Blocked(plan.name, window.name, start, start + length))
        for day in window.dates:
            start = dt.datetime.combine(day, dt.time(), zone).astimezone(dt.UTC)
            end = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), zone)
            if start <= until and end > now:
                found.append(Blocked(plan.name, window.name, start, end.astimezone(dt.UTC)))
    return sorted(found, key=lambda b: b.start)


def calendar(
    plans: Sequence[DrillPlan],
    planned: Mapping[str, Sequence[dt.datetime]],
    lengths: Mapping[str, dt.timedelta],
) -> list[Window]:
    """Each planned drill (``planned``: by plan, from :func:`planned_drills`) as a window,
    flagged where it overlaps another plan's on a cluster both touch: those two would
    refuse each other (target leases)."""
    windows = []
    for plan in plans:
        clusters = frozenset(
            {cluster_of(plan, plan.sites.primary), cluster_of(plan, plan.sites.dr)}
        )
        length = lengths.get(plan.name) or DRILL_WINDOW
        windows += [Window(plan.name, t, t + length, clusters) for t in planned.get(plan.name, ())]
    windows.sort(key=lambda w: w.start)
    overlaps: dict[int, set[str]] = {i: set() for i in range(len(windows))}
    for i, w in enumerate(windows):  # sorted by start: only the next few can overlap
        for j in range(i + 1, len(windows)):
            o = windows[j]
            if o.start >= w.end:
                break
            if o.plan != w.plan and o.clusters & w.clusters:
                overlaps[i].add(o.plan)
                overlaps[j].add(w.plan)
    return [
        Window(w.plan, w.start, w.end, w.clusters, tuple(sorted(overlaps[i])))
        for i, w in enumerate(windows)
    ]
