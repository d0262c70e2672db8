"""The plan's gates as they stand now: blocking alerts read from Alertmanager's API, and
blocked windows (change freezes) read from the clock.

A drill or a practice inside a gate is refused (a scheduled one is skipped and recorded
as skipped). An incident is never stopped by them: it records them as they stood. An
Alertmanager that does not answer leaves the alert gates ``unverified``: nothing can say
that no blocking alert fires.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import httpx

from drills.errors import RunRefused
from drills.plan import DrillPlan
from drills.plan.cron import next_fire_times
from drills.plan.models.drill_gates import Alertmanager, BlockedWindow, split_matchers
from drills.store.kinds import Mode
from drills.text import first_line

if TYPE_CHECKING:  # names of types only
    from drills.store.details import RunDetails
    from drills.store.history import HistoryStore
    from drills.takeover.request import DrillRequest

ALERTMANAGER_TIMEOUT_S = 5.0
CLEAR, BLOCKING, UNVERIFIED = "clear", "blocking", "unverified"
IGNORE_ACTION = "ignore-gates"  # the audit log's word for a run that went on unverified


@dataclass(frozen=True)
class GateState:
    kind: str  # "alert" or "window"
    name: str  # the selector, or the window's name
    state: str  # clear, blocking or unverified
    detail: str
    until: str | None = None  # when a blocked window ends (ISO 8601)

    def describe(self) -> str:
        return f"{self.kind} {self.name}: {self.state}: {self.detail}"


@dataclass(frozen=True)
class GateReport:
    states: tuple[GateState, ...]

    @property
    def blocking(self) -> list[GateState]:
        return [s for s in self.states if s.state == BLOCKING]

    @property
    def unverified(self) -> list[GateState]:
        return [s for s in self.states if s.state == UNVERIFIED]

    def to_json(self) -> list[dict[str, Any]]:
        return [asdict(s) for s in self.states]


# -- windows ---------------------------------------------------------------------------
def window_state(window: BlockedWindow, now: dt.datetime) -> GateState:
    local = now.astimezone(ZoneInfo(window.timezone))
    until = _cron_until(window, local) or _dates_until(window, local)
    if until is None:
        return GateState("window", window.name, CLEAR, "not inside it")
    ends = until.astimezone(dt.UTC).isoformat(timespec="minutes")
    return GateState("window", window.name, BLOCKING, f"inside it until {ends}", ends)


def _cron_until(window: BlockedWindow, local: dt.datetime) -> dt.datetime | None:
    if window.cron is None or window.duration is None:
        return None
    length = dt.timedelta(seconds=window.duration)
    naive = local.replace(tzinfo=None)
    days = length.days + 2
    opened = [t for t in next_fire_times(window.cron, naive - length, 10_000, within_days=days)
              if t <= naive]  # fmt: skip
    if not opened:
        return None
    return (opened[-1] + length).replace(tzinfo=local.tzinfo)


def _dates_until(window: BlockedWindow, local: dt.datetime) -> dt.datetime | None:
    day = local.date()
    if day not in window.dates:
        return None
    while day in window.dates:  # consecutive blocked days make one window
        day += dt.timedelta(days=1)
    return dt.datetime.combine(day, dt.time(), local.tzinfo)


# -- alerts ----------------------------------------------------------------------------
def _alert_name(alert: dict[str, Any]) -> str:
    labels = alert.get("labels") or {}
    name = labels.get("alertname", "?")
    others = ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "alertname")
    return f"{name}{{{others}}}" if others else str(name)


def active_alerts(plan: DrillPlan, am: Alertmanager, selector: str) -> list[dict[str, Any]]:
    """Active alerts (neither silenced nor inhibited) matching ``selector``."""
    headers = {}
    if am.token is not None:
        headers["Authorization"] = f"Bearer {plan.resolve_secret(am.token)}"
    params = httpx.QueryParams([("active", "true"), ("silenced", "false"), ("inhibited", "false")])
    for matcher in split_matchers(selector):
        params = params.add("filter", matcher.strip())
    url = str(am.url).rstrip("/") + "/api/v2/alerts"
    with httpx.Client(timeout=ALERTMANAGER_TIMEOUT_S, headers=headers) as client:
        response = client.get(url, params=params)
        response.raise_for_status()
        found = response.json()
    if not isinstance(found, list):
        raise ValueError("Alertmanager answered something other than a list of alerts")
    return [a for a in found if (a.get("status") or {}).get("state", "active") == "active"]


def alert_state(plan: DrillPlan, am: Alertmanager, selector: str) -> GateState:
    try:
        alerts = active_alerts(plan, am, selector)
    except (httpx.HTTPError, ValueError) as exc:
        why = f"Alertmanager at {am.url} did not answer ({first_line(exc) or type(exc).__name__})"
        return GateState("alert", selector, UNVERIFIED, why)
    if not alerts:
        return GateState("alert", selector, CLEAR, "no active alert matches")
    named = "; ".join(f"{_alert_name(a)} firing since {a.get('startsAt', '?')}" for a in alerts)
    return GateState("alert", selector, BLOCKING, named)


def evaluate(plan: DrillPlan, now: dt.datetime | None = None) -> GateReport:
    """Every gate of the plan, as it stands now."""
    gates = plan.gates
    moment = now or dt.datetime.now(dt.UTC)
    states = [window_state(w, moment) for w in gates.blocked_windows]
    if gates.alertmanager is not None:
        states += [alert_state(plan, gates.alertmanager, s) for s in gates.blocking_alerts]
    return GateReport(tuple(states))


def refusal(report: GateReport) -> str | None:
    """Why a drill or practice may not start now; None when every gate is clear."""
    if report.blocking:
        return "gates: " + "; ".join(s.describe() for s in report.blocking)
    if report.unverified:
        return (
            "gates: "
            + "; ".join(s.describe() for s in report.unverified)
            + ". Go on only with --ignore-gates and a --reason (audited)."
        )
    return None


__all__ = [
    "BLOCKING",
    "CLEAR",
    "UNVERIFIED",
    "GateReport",
    "GateState",
    "alert_state",
    "evaluate",
    "gate_run",
    "refusal",
    "window_state",
]


def gate_run(
    request: DrillRequest, history: HistoryStore, details: RunDetails, *, audit: bool = True
) -> str | None:
    """Hold a run to the plan's gates before it leases or changes anything.

    Returns why a scheduled drill or practice is skipped; raises RunRefused for a manual
    one inside a gate (or with a gate unverified, unless ``ignore_gates``: then audited).
    An incident records the gates as they stood and is never stopped; a failback and a
    dry run are not gated. Without ``audit`` (the preview an operator confirms before the
    run) a gate ignored on purpose is not written to the audit log: the run writes it.
    """
    plan, mode = request.plan, request.mode
    gates = plan.gates
    if request.dry_run or mode == Mode.FAILBACK:
        return None
    if not gates.blocked_windows and not gates.blocking_alerts:
        return None
    report = evaluate(plan)
    details.gates = report.to_json()
    why = refusal(report) if mode.rehearsal else None
    if why is None:
        return None
    if request.scheduled:
        return why
    if report.blocking or not request.ignore_gates:
        raise RunRefused(why)
    if not audit:
        return None
    history.audit(
        who=request.operator, action=IGNORE_ACTION, plan=plan.name, accepted=True,
        reason=request.reason, detail={"mode": str(mode), "gates": report.to_json()},
    )  # fmt: skip
    return None
