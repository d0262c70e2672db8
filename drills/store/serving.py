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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from sqlalchemy import func, select
from sqlalchemy.orm import Session, load_only

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


CHUNK = 400  # plans per IN list: well inside every backend's bound on parameters
# What placing production needs of a run: not its timeline, readiness or figures.
_PLACING = (
    DrillRun.id, DrillRun.plan, DrillRun.mode, DrillRun.dry_run, DrillRun.status,
    DrillRun.started_at, DrillRun.t0, DrillRun.restored_at, DrillRun.finished_at,
    DrillRun.details,
)  # fmt: skip


def _chunks(plans: Sequence[str]) -> Iterator[list[str]]:
    names = list(dict.fromkeys(plans))
    for start in range(0, len(names), CHUNK):
        yield names[start : start + CHUNK]


def _leases(s: Session, plans: list[str], now: dt.datetime) -> dict[str, str]:
    rows = s.execute(
        select(Lease.plan, Lease.run_id, Lease.expires_at).where(Lease.plan.in_(plans))
    )
    return {plan: run_id for plan, run_id, expires_at in rows if expires_at > now}


def _unfinished(s: Session, plans: list[str]) -> dict[str, list[DrillRun]]:
    """Runs not finished, newest first (ix_run_finished: few rows ever match)."""
    query = (
        select(DrillRun)
        .options(load_only(*_PLACING))
        .where(
            DrillRun.finished_at.is_(None), DrillRun.dry_run.is_(False), DrillRun.plan.in_(plans)
        )
        .order_by(DrillRun.started_at.desc())
    )
    found: dict[str, list[DrillRun]] = {}
    for run in s.scalars(query):
        found.setdefault(run.plan, []).append(run)
    return found


def _movers(s: Session, plans: list[str]) -> dict[str, list[DrillRun]]:
    """Each plan's newest incidents and failbacks (LOOK_BACK of them), newest first."""
    ranked = (
        select(
            DrillRun.id,
            func.row_number()
            .over(partition_by=DrillRun.plan, order_by=DrillRun.started_at.desc())
            .label("rank"),
        )
        .where(
            DrillRun.plan.in_(plans),
            DrillRun.mode.in_([Mode.INCIDENT, Mode.FAILBACK]),
            DrillRun.dry_run.is_(False),
        )
        .subquery()
    )
    query = (
        select(DrillRun)
        .options(load_only(*_PLACING))
        .where(DrillRun.id.in_(select(ranked.c.id).where(ranked.c.rank <= LOOK_BACK)))
        .order_by(DrillRun.started_at.desc())
    )
    found: dict[str, list[DrillRun]] = {}
    for run in s.scalars(query):
        found.setdefault(run.plan, []).append(run)
    return found


def _serving(
    placed: RecordedServing, unfinished: list[DrillRun], lease: str | None
) -> RecordedServing:
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


def recorded_serving_of(
    history: HistoryStore, plans: Sequence[str], *, now: dt.datetime | None = None
) -> dict[str, RecordedServing]:
    """Where each of ``plans`` serves from, by the history alone: four statements for any
    number of plans (the one set of rules `drills status`, the metrics and the fleet use)."""
    now = now or dt.datetime.now(dt.UTC)
    found: dict[str, RecordedServing] = {}
    with history.session() as s:
        for chunk in _chunks(plans):
            leases, unfinished, movers = (
                _leases(s, chunk, now),
                _unfinished(s, chunk),
                _movers(s, chunk),
            )
            placed = {
                plan: next(
                    filter(None, map(placed_by, movers.get(plan, ()))),
                    RecordedServing(Site.PRIMARY),
                )
                for plan in chunk
            }
            for plan in chunk:
                found[plan] = _serving(placed[plan], unfinished.get(plan, []), leases.get(plan))
    return found


def recorded_serving(
    history: HistoryStore, plan: str, *, now: dt.datetime | None = None
) -> RecordedServing:
    """Where ``plan`` serves from, by the history alone."""
    return recorded_serving_of(history, [plan], now=now)[plan]


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
    "recorded_serving_of",
    "serving_from_dr_refusal",
]
