"""Where a plan serves from: the history, confirmed against the live DNS and the sites.

``serving_status`` is the one answer for `drills status`, the dashboard and any
caller: the site the history records (drills.store.serving), since when, the run
that put it there, the open incident and the run holding the plan; then what the
authoritative DNS servers answer and which site endpoint serves. When the live
record points elsewhere than the history says (someone switched DNS by hand), the
status says so in ``disagreement``.

The JSON (``ServingStatus.to_json``) is a stable interface, described in the docs
(how-to/fail-back.md):
keys are only ever added.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from drills.errors import DrillError
from drills.plan import DrillPlan
from drills.store.history import HistoryStore
from drills.store.serving import RecordedServing, Site, recorded_serving
from drills.targets.dns import normalize_value
from drills.targets.http import new_client
from drills.targets.probe import serving
from drills.targets.providers import dns_adapter

PROBE_READ_S = 2.0


@dataclass(frozen=True)
class LiveView:
    """What the world answers now."""

    dns: str  # "primary", "dr", "mixed" (servers disagree), "other" or "unknown"
    dns_values: tuple[str, ...] = ()
    endpoints: dict[str, bool] = field(default_factory=dict)  # role → serves (HTTP 200)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "dns": self.dns,
            "dns_values": list(self.dns_values),
            "endpoints": dict(self.endpoints),
            "error": self.error,
        }


@dataclass(frozen=True)
class ServingStatus:
    plan: str
    recorded: RecordedServing
    live: LiveView | None  # None: not asked (``live=False``)
    checked_at: dt.datetime

    @property
    def site(self) -> Site:
        return self.recorded.site

    @property
    def unconfirmed(self) -> str | None:
        """Why the live record could not be compared with the history; None when it was
        (or was not asked). A record nobody could read agrees with nothing."""
        live = self.live
        if live is None or live.dns != "unknown":
            return None
        why = live.error or "no authoritative server answered"
        return f"could not confirm where DNS points: {why}"

    @property
    def agrees(self) -> bool | None:
        """True when the live world agrees with the history, False when it does not, None
        when the record could not be read (or was not asked, with ``live=False``)."""
        if self.live is None or self.unconfirmed:
            return None
        return self.disagreement is None

    @property
    def disagreement(self) -> str | None:
        """How the live world differs from the history, in words; None when it agrees or
        cannot be told (see ``unconfirmed``)."""
        live = self.live
        if live is None or live.dns == "unknown":
            return None
        recorded = self.recorded.site
        if recorded == Site.IN_TRANSITION:
            return None  # a move under way: either answer is expected
        if live.dns != recorded.value:
            values = ", ".join(live.dns_values) or "nothing"
            return (
                f"the history says {recorded.value}, but DNS answers {values} ({live.dns}): "
                "the record was changed outside drills"
            )
        other = "dr" if recorded == Site.PRIMARY else "primary"
        if live.endpoints.get(other):
            return f"the history says {recorded.value}, but the {other} endpoint serves too"
        return None

    def to_json(self) -> dict[str, Any]:
        r = self.recorded
        return {
            "plan": self.plan,
            "serving": r.site.value,
            "since": r.since.isoformat() if r.since else None,
            "run_id": r.run_id,
            "incident_id": r.incident_id,
            "incident_t0": r.incident_t0.isoformat() if r.incident_t0 else None,
            "holding_run": r.holding_run,
            "lease_run_id": r.lease_run_id,
            "unfinished_runs": list(r.unfinished),
            "live": self.live.to_json() if self.live else None,
            "agrees": self.agrees,
            "disagreement": self.disagreement,
            "checked_at": self.checked_at.isoformat(timespec="seconds"),
            "unconfirmed": self.unconfirmed,
        }


def _dns_side(plan: DrillPlan, values: set[tuple[str, ...]]) -> str:
    if len(values) != 1:
        return "mixed" if values else "unknown"
    rtype = str(plan.dns.record.type)
    (answer,) = values
    for side, value in (("primary", plan.dns.primary_value), ("dr", plan.dns.dr_value)):
        if answer == (normalize_value(rtype, value),):
            return side
    return "other"


def look_live(plan: DrillPlan) -> LiveView:
    """One read of the record on every authoritative server, one probe of each site."""
    endpoints: dict[str, bool] = {}
    with new_client(read_timeout=PROBE_READ_S) as client:
        for role, site in plan.sites.items():
            endpoints[role] = serving(client, str(site.endpoint)).ok
    try:
        target = dns_adapter(plan)
        try:
            answers = target.read(plan.dns.record.name, str(plan.dns.record.type))
        finally:
            target.close()
    except DrillError as exc:
        return LiveView("unknown", endpoints=endpoints, error=str(exc))
    values = {tuple(a.values) for a in answers}
    flat = tuple(sorted({v for a in answers for v in a.values}))
    return LiveView(_dns_side(plan, values), flat, endpoints)


def serving_status(plan: DrillPlan, history: HistoryStore, *, live: bool = True) -> ServingStatus:
    """Where ``plan`` serves from: the history's answer, confirmed live unless ``live`` is off."""
    recorded = recorded_serving(history, plan.name)
    return ServingStatus(
        plan.name, recorded, look_live(plan) if live else None, dt.datetime.now(dt.UTC)
    )


# The keys of ServingStatus.to_json(), in order: a stable interface (see the docs).
STATUS_KEYS = (
    "plan", "serving", "since", "run_id", "incident_id", "incident_t0", "holding_run",
    "lease_run_id", "unfinished_runs", "live", "agrees", "disagreement", "checked_at",
    "unconfirmed",
)  # fmt: skip

__all__ = ["STATUS_KEYS", "LiveView", "ServingStatus", "look_live", "serving_status"]
