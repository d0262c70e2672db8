"""Where a plan serves from, as the history store records it.

The runs that move production are incidents (to DR) and failbacks (back to the
primary); a drill always ends where it started. The newest of them that changed
something says where production is; a run that never finished (crashed, or an
incident stopped part-way) leaves it in transition. ``drills status`` confirms this
against the live DNS record and the site endpoints (drills.takeover.status); the
metrics exporter reads it from here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from enum import StrEnum

from sqlalchemy import select

from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus
from drills.store.models import DrillRun, Lease

# How far back to look for the run that placed production: incidents and failbacks are rare.
LOOK_BACK = 200


class Site(StrEnum):
    PRIMARY = "primary"
    DR = "dr"
    IN_TRANSITION = "in-transition"


@dataclass(frozen=True)
class RecordedServing:
    site: Site
    since: dt.datetime | None = None  # None: always at the primary, as far as the store knows
    run_id: str | None = None  # the run that put it there
    incident_id: str | None = None  # the open incident (serving from DR, or on its way)
    incident_t0: dt.datetime | None = None
    lease_run_id: str | None = None  # the run holding the plan's lease now
    unfinished: tuple[str, ...] = field(default_factory=tuple)  # runs that never finished

    @property
    def holding_run(self) -> str | None:
        """The run that holds the plan: a new run waits for (or recovers) it first."""
        return self.lease_run_id or (self.unfinished[0] if self.unfinished else None)


def _recover_action(run: DrillRun) -> str | None:
    return run.details.recover[-1].action if run.details.recover else None


def _incident_placed(run: DrillRun) -> RecordedServing | None:
    link = run.details.incident
    if link is not None and link.closed_at is not None:
        return RecordedServing(Site.PRIMARY, link.closed_at, link.failback_run or run.id)
    if run.status == RunStatus.SUCCEEDED or (
        # Completed or held by `drills recover`; one it failed back is closed (above).
        run.status == RunStatus.RECOVERED and _recover_action(run) != "fail-back"
    ):
        since = run.restored_at or run.t0 or run.started_at
        return RecordedServing(Site.DR, since, run.id, run.id, run.t0)
    return None  # stopped before any change: production never moved


def _failback_placed(run: DrillRun) -> RecordedServing | None:
    if run.status == RunStatus.SUCCEEDED or (
        run.status == RunStatus.RECOVERED and _recover_action(run) == "complete"
    ):
        return RecordedServing(Site.PRIMARY, run.restored_at or run.finished_at, run.id)
    return None  # rolled back, cancelled or refused: DR still serves


def placed_by(run: DrillRun) -> RecordedServing | None:
    """Where ``run`` left production, when it moved it; None when it did not."""
    if run.dry_run or run.finished_at is None:
        return None
    if run.mode == Mode.INCIDENT:
        return _incident_placed(run)
    if run.mode == Mode.FAILBACK:
        return _failback_placed(run)
    return None


def _lease_run(history: HistoryStore, plan: str, now: dt.datetime) -> str | None:
    with history.session() as s:
        lease = s.get(Lease, plan)
    return lease.run_id if lease is not None and lease.expires_at > now else None


def _movers(history: HistoryStore, plan: str) -> list[DrillRun]:
    query = (
        select(DrillRun)
        .where(
            DrillRun.plan == plan,
            DrillRun.mode.in_([Mode.INCIDENT, Mode.FAILBACK]),
            DrillRun.dry_run.is_(False),
        )
        .order_by(DrillRun.started_at.desc())
        .limit(LOOK_BACK)
    )
    with history.session() as s:
        return list(s.scalars(query).all())


def recorded_serving(
    history: HistoryStore, plan: str, *, now: dt.datetime | None = None
) -> RecordedServing:
    """Where ``plan`` serves from, by the history alone."""
    now = now or dt.datetime.now(dt.UTC)
    lease = _lease_run(history, plan, now)
    unfinished = [r for r in history.unfinished_runs(plan) if not r.dry_run]
    placed = next(
        filter(None, map(placed_by, _movers(history, plan))), RecordedServing(Site.PRIMARY)
    )
    ids = tuple(r.id for r in unfinished)
    if unfinished:
        # A run that never finished (a drill too, part-way): no site is known to serve alone.
        run = unfinished[0]
        incident = run.id if run.mode == Mode.INCIDENT else placed.incident_id
        t0 = run.t0 if run.mode == Mode.INCIDENT else placed.incident_t0
        return RecordedServing(Site.IN_TRANSITION, run.started_at, run.id, incident, t0, lease, ids)
    return RecordedServing(
        placed.site, placed.since, placed.run_id, placed.incident_id, placed.incident_t0, lease, ids
    )


def open_incident(history: HistoryStore, plan: str) -> DrillRun | None:
    """The incident run whose takeover DR serves now, when the plan serves from DR."""
    recorded = recorded_serving(history, plan)
    if recorded.site != Site.DR or recorded.incident_id is None:
        return None
    return history.get_run(recorded.incident_id)


def serving_from_dr_refusal(history: HistoryStore, plan: str) -> str | None:
    """Why a takeover (a drill, an incident) may not start: the plan already serves from
    DR, so a takeover would fence and promote what already serves. None when it may."""
    incident = open_incident(history, plan)
    if incident is None:
        return None
    return (
        f"plan {plan} already serves from DR (incident {incident.id}); bring it home first: "
        f"`drills run PLAN --mode failback` (see `drills status`)"
    )


__all__ = [
    "RecordedServing",
    "Site",
    "open_incident",
    "placed_by",
    "recorded_serving",
    "serving_from_dr_refusal",
]
