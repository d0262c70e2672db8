"""Read-only queries of the history store that only the dashboard needs.

Each selects the columns it shows and pages in SQL; rows come back as small frozen
records, which Streamlit's cache can copy cheaply (ORM objects it cannot).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from drills.store import (
    DrillRun,
    HistoryStore,
    Mode,
    RunStatus,
    Verdict,
    first_run_since,
    plan_names,
    recent_events,
    rto_rows,
    run_of_flow_run,
)
from drills.store import (
    runs_page as stored_runs_page,
)


@dataclass(frozen=True)
class RunRow:
    id: str
    plan: str
    mode: Mode
    dry_run: bool
    operator: str
    reason: str
    status: RunStatus
    verdict: Verdict | None
    started_at: dt.datetime
    t0: dt.datetime | None
    finished_at: dt.datetime | None
    rto_seconds: float | None
    client_rto_seconds: float | None
    full_capacity_seconds: float | None
    rto_target: float | None
    rpo_worst: float | None
    rpo_target: float | None
    flow_run_id: str | None
    error: str | None

    @property
    def duration_seconds(self) -> float | None:
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


@dataclass(frozen=True)
class RtoPoint:
    id: str
    plan: str
    started_at: dt.datetime
    verdict: Verdict | None
    rto_seconds: float | None
    rto_target: float | None
    full_capacity_seconds: float | None = None  # None: not measured (runs before it was)
    forecast_seconds: float | None = None  # what the preflight forecast for it
    mode: str = "drill"

    @property
    def failed(self) -> bool:
        return self.verdict is not None and Verdict(self.verdict).failure


@dataclass(frozen=True)
class AuditRow:
    at: dt.datetime
    action: str
    who: str
    plan: str
    accepted: bool
    reason: str
    outcome: str


def run_row(run: DrillRun) -> RunRow:
    measured = run.details.measurement
    lags = [float(v) for v in (run.rpo_seconds or {}).values() if v is not None]
    return RunRow(
        id=run.id,
        plan=run.plan,
        mode=run.mode,
        dry_run=run.dry_run,
        operator=run.operator,
        reason=run.reason,
        status=run.status,
        verdict=run.verdict,
        started_at=run.started_at,
        t0=run.t0,
        finished_at=run.finished_at,
        rto_seconds=run.rto_seconds,
        client_rto_seconds=run.client_rto_seconds,
        full_capacity_seconds=run.details.full_capacity_seconds,
        rto_target=measured.rto_target_seconds if measured else None,
        rpo_worst=max(lags) if lags else None,
        rpo_target=measured.rpo_target_seconds if measured else None,
        flow_run_id=run.flow_run_id,
        error=run.error,
    )


# One page of runs, newest first, as rows, and whether another page follows.
runs_page = partial(stored_runs_page, row=run_row)


def rto_points(
    store: HistoryStore, *, plan: str | None, mode: str | None, limit: int = 200
) -> list[RtoPoint]:
    """RTO of the latest runs (dry runs left out), oldest first, for the trend chart.

    Every verdict is kept whatever the table's verdict filter: the chart is there to
    show failures among successes.
    """
    return [RtoPoint(*row) for row in rto_rows(store, plan=plan, mode=mode,
                                                           limit=limit)]  # fmt: skip


def run_plans(store: HistoryStore) -> list[str]:
    """Every plan name that has a run in the store."""
    return plan_names(store)


def last_run(store: HistoryStore, plan: str, mode: str | None = None) -> RunRow | None:
    runs = store.list_runs(plan=plan, mode=mode, limit=1)
    return run_row(runs[0]) if runs else None


def run_for_flow_run(
    store: HistoryStore,
    flow_run_id: str,
    plan: str,
    declared_at: dt.datetime | None,
    mode: str = Mode.INCIDENT,
) -> RunRow | None:
    """The history record a flow run writes: by its flow run id, else by plan and time."""
    run = run_of_flow_run(store, flow_run_id)
    if run is None and declared_at is not None:
        # The run record starts after the click; the first run of this mode on this
        # plan since then is the one.
        run = first_run_since(store, plan, mode, declared_at)
    return run_row(run) if run is not None else None


def recent_audit(store: HistoryStore, actions: Sequence[str], limit: int = 20) -> list[AuditRow]:
    return [
        AuditRow(
            e.at,
            e.action,
            e.who,
            e.plan,
            e.accepted,
            e.reason,
            str((e.detail or {}).get("outcome", "")),
        )
        for e in recent_events(store, actions, limit)
    ]
