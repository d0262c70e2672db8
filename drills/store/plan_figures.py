"""The few indexed questions `drills metrics serve` asks the store of each plan, on one
connection: each a ``LIMIT 1`` on an index, never a scan of the runs, and one for the runs
not finished.

Each statement is built once, with the plan as a bound parameter: building a SQLAlchemy
expression costs more than running it on an index.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Select, String, bindparam, func, select

from drills.store.checkpoints import chain_length
from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus
from drills.store.models import (
    DrillRun,
    IncidentProposal,
    Lease,
    ReadinessSnapshot,
    details_value,
)
from drills.store.proposals import PENDING

_LATEST_READINESS = (
    select(ReadinessSnapshot.id, ReadinessSnapshot.checked_at)
    .where(ReadinessSnapshot.plan == bindparam("plan", type_=String))
    .order_by(ReadinessSnapshot.checked_at.desc())
    .limit(1)
)
_REPORT = select(ReadinessSnapshot.report).where(ReadinessSnapshot.id == bindparam("id"))
_PLAN = bindparam("plan", type_=String)


def _newest(mode: Mode, *columns: Any, where: Sequence[Any]) -> Select[Any]:
    """The newest run of a plan in one mode that is not a dry run, and matches ``where``:
    ix_run_plan_mode_started, walked from the newest."""
    query = select(*columns).where(
        DrillRun.plan == _PLAN, DrillRun.mode == mode, DrillRun.dry_run.is_(False), *where
    )
    return query.order_by(DrillRun.started_at.desc()).limit(1)


# Read in SQL from the one run found, not by loading its details.
_FULL_CAPACITY = details_value("measurement", "full_capacity_seconds").as_float()
_DETECTION = details_value("detection", "detection_seconds").as_float()
_CARRY_RATIO = details_value("measurement", "capacity")["ratio"].as_float()
_MEASURED = {
    mode: _newest(
        mode,
        DrillRun.finished_at,
        DrillRun.rto_seconds,
        DrillRun.client_rto_seconds,
        _FULL_CAPACITY,
        DrillRun.rpo_seconds,
        _DETECTION,
        DrillRun.preemption_seconds,
        _CARRY_RATIO,
        where=(DrillRun.rto_seconds.is_not(None), DrillRun.finished_at.is_not(None)),
    )
    for mode in Mode
}
# The newest finished run of a mode, and its SLOs as it recorded them ([] when it had none).
_SLO_MODES = (Mode.DRILL, Mode.INCIDENT)
_LAST_SLO = {
    mode: _newest(mode, details_value("slo"), where=(DrillRun.finished_at.is_not(None),))
    for mode in _SLO_MODES
}
_DRILL_SUCCESS = _newest(
    Mode.DRILL,
    DrillRun.finished_at,
    DrillRun.started_at,
    where=(DrillRun.status.in_([s for s in RunStatus if s.counts_for_cadence]),),
)
_PENDING_PROPOSALS = (  # ix_proposal_plan_state
    select(func.count())
    .select_from(IncidentProposal)
    .where(IncidentProposal.plan == _PLAN, IncidentProposal.state == PENDING)
)
_UNFINISHED = select(DrillRun.id, DrillRun.plan, DrillRun.mode, DrillRun.started_at).where(
    DrillRun.finished_at.is_(None), DrillRun.dry_run.is_(False)
)


class PlanFigures:
    """The questions, asked on one connection. Times come back as the database gives them
    (SQLite's without their zone)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def latest_readiness(self, plan: str) -> tuple[int, dt.datetime] | None:
        """The id and time of the plan's newest readiness snapshot."""
        row = self._conn.execute(_LATEST_READINESS, {"plan": plan}).first()
        return None if row is None else (row[0], row[1])

    def readiness_report(self, snapshot_id: int) -> dict[str, Any]:
        return self._conn.execute(_REPORT, {"id": snapshot_id}).scalar_one()

    def last_measured(self, plan: str, mode: Mode) -> tuple[Any, ...] | None:
        """The newest run of ``mode`` with an RTO measured, not a dry run: (finished_at,
        rto, client rto, full capacity seconds, rpo by dataset, detection seconds, preemption
        seconds, the share of the primary's demand DR carried)."""
        row = self._conn.execute(_MEASURED[mode], {"plan": plan}).first()
        return None if row is None else tuple(row)

    def last_slos(self, plan: str, mode: Mode) -> list[dict[str, Any]]:
        """The SLOs of the newest finished run of ``mode`` (a drill or an incident), as
        it recorded them; [] without one."""
        if mode not in _LAST_SLO:
            return []
        row = self._conn.execute(_LAST_SLO[mode], {"plan": plan}).first()
        value = row[0] if row is not None else None
        return [s for s in value if isinstance(s, dict)] if isinstance(value, list) else []

    def last_drill_success(self, plan: str) -> tuple[Any, Any] | None:
        """(finished_at, started_at) of the newest drill that counts for the cadence."""
        row = self._conn.execute(_DRILL_SUCCESS, {"plan": plan}).first()
        return None if row is None else (row[0], row[1])

    def unfinished_runs(self) -> list[tuple[str, str, str, dt.datetime]]:
        """(id, plan, mode, started_at) of every run not finished, dry runs left out
        (ix_run_finished)."""
        return [tuple(row) for row in self._conn.execute(_UNFINISHED).all()]  # type: ignore[misc]

    def lease_expiries(self) -> list[tuple[str, dt.datetime]]:
        """(run id, expires_at) of every plan's lease."""
        rows = self._conn.execute(select(Lease.run_id, Lease.expires_at))
        return [(run_id, expires_at) for run_id, expires_at in rows]

    def pending_proposals(self, plan: str) -> int:
        """Incidents proposed by alerts that wait for an operator."""
        return int(self._conn.execute(_PENDING_PROPOSALS, {"plan": plan}).scalar_one())

    def chain_length(self, plan: str) -> int:
        return chain_length(self._conn, plan)


@contextmanager
def plan_figures(store: HistoryStore) -> Iterator[PlanFigures]:
    with store.engine.connect() as conn:
        yield PlanFigures(conn)
