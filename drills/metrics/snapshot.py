"""What `drills metrics serve` exposes, computed from the history store and the plans.

Pure: no Prometheus here. ``take_snapshot`` asks the store a few indexed questions per
plan (each a ``LIMIT 1`` on an index, never a scan of the runs) and one for the runs not
finished; the report of a readiness snapshot is parsed once, then kept by its id.

"Never" is 0 for a timestamp, as Prometheus does it: a plan never drilled has a last
successful drill at 0, so the cadence says it is long overdue.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from drills.checks.areas.cadence import MAX_DRILL_AGE_DAYS
from drills.checks.base import Status
from drills.plan import DrillPlan
from drills.store.history import HistoryStore
from drills.store.kinds import Mode
from drills.store.plan_figures import PlanFigures, plan_figures
from drills.store.serving import RecordedServing, recorded_serving_of

DEFAULT_READINESS_INTERVAL_S = 900.0  # the readiness-check deployment of prefect.yaml
CADENCE_S = MAX_DRILL_AGE_DAYS * 86400.0
SITES = ("primary", "dr", "in-transition")


@dataclass(frozen=True)
class CheckState:
    check: str
    category: str
    blocking: bool
    status: str


@dataclass(frozen=True)
class DatasetLag:
    dataset: str
    rpo_target_s: float
    lag_s: float | None  # None: the latest readiness did not measure it


@dataclass(frozen=True)
class RunFigures:
    """The last run of one mode with an RTO measured (not a dry run)."""

    mode: str
    finished_at: float
    rto_s: float
    client_rto_s: float | None
    full_capacity_s: float | None  # None: a run from before takeovers measured it
    rpo_s: Mapping[str, float]
    detection_s: float | None = None  # an incident's declaration - detection, when known
    preemption_s: float | None = None  # GPUs taken back from DR's low-priority work
    carry_ratio: float | None = None  # the share of the primary's demand DR carried


@dataclass(frozen=True)
class SloState:
    """One SLO as the newest finished run of a mode recorded it."""

    mode: str
    slo: str
    status: str  # held, breached, unverified or stopped
    value: float | None  # the last value read


@dataclass(frozen=True)
class PlanMetrics:
    plan: str
    rto_target_s: float
    rpo_target_s: float
    readiness_interval_s: float
    readiness_at: float  # 0: never
    checks: tuple[CheckState, ...]
    lags: tuple[DatasetLag, ...]
    last_drill_success: float  # 0: never
    cadence_s: float
    last_runs: tuple[RunFigures, ...]
    serving_site: str
    in_progress: Mapping[str, int]  # by mode: unfinished, its lease held
    stuck: Mapping[str, int]  # by mode: unfinished, nobody holds its lease (needs recover)
    oldest_unfinished_start: float | None
    chain_length: int = 0  # links in the plan's evidence chain (its head's seq)
    proposals_pending: int = 0  # incidents proposed by alerts, waiting for an operator
    slos: tuple[SloState, ...] = ()


@dataclass(frozen=True)
class MetricsSnapshot:
    taken_at: float
    plans: tuple[PlanMetrics, ...]
    invalid_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Unfinished:
    in_progress: dict[str, int] = field(default_factory=dict)
    stuck: dict[str, int] = field(default_factory=dict)
    oldest: float | None = None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _ts(value: dt.datetime | None) -> float:
    return value.timestamp() if value is not None else 0.0


def _aware(value: dt.datetime) -> dt.datetime:
    # Core selects skip the ORM's type on some dialects' aggregates; SQLite drops the zone.
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


class Snapshotter:
    """Takes snapshots of one store; keeps the parsed readiness reports by snapshot id."""

    def __init__(
        self, store: HistoryStore, readiness_interval_s: float = DEFAULT_READINESS_INTERVAL_S
    ) -> None:
        self.store = store
        self.readiness_interval_s = readiness_interval_s
        self._reports: dict[str, tuple[int, tuple[CheckState, ...], dict[str, float]]] = {}
        self._lock = threading.Lock()

    def take(
        self,
        plans: Sequence[DrillPlan],
        invalid_files: Sequence[str] = (),
        now: dt.datetime | None = None,
    ) -> MetricsSnapshot:
        now = now or dt.datetime.now(dt.UTC)
        with plan_figures(self.store) as db:
            unfinished = _unfinished(db, now)
            serving = recorded_serving_of(self.store, [p.name for p in plans], now=now)
            figures = tuple(
                self._plan(db, plan, unfinished.get(plan.name, _Unfinished()), serving[plan.name])
                for plan in plans
            )
        return MetricsSnapshot(now.timestamp(), figures, tuple(invalid_files))

    def _plan(
        self,
        db: PlanFigures,
        plan: DrillPlan,
        unfinished: _Unfinished,
        serving: RecordedServing,
    ) -> PlanMetrics:
        readiness_at, checks, lags = self._readiness(db, plan.name)
        last_runs = tuple(
            figures for mode in Mode if (figures := _last_measured(db, plan.name, mode))
        )
        return PlanMetrics(
            plan=plan.name,
            rto_target_s=plan.objectives.rto,
            rpo_target_s=plan.objectives.rpo,
            readiness_interval_s=self.readiness_interval_s,
            readiness_at=readiness_at,
            checks=checks,
            lags=tuple(
                DatasetLag(ds.name, ds.rpo_target, lags.get(ds.name)) for ds in plan.datasets
            ),
            last_drill_success=_last_drill_success(db, plan.name),
            cadence_s=CADENCE_S,
            last_runs=last_runs,
            serving_site=serving.site.value,  # the rules of `drills status` (drills.store.serving)
            in_progress=unfinished.in_progress,
            stuck=unfinished.stuck,
            oldest_unfinished_start=unfinished.oldest,
            chain_length=db.chain_length(plan.name),
            proposals_pending=db.pending_proposals(plan.name),
            slos=tuple(
                SloState(
                    str(mode),
                    str(s.get("name")),
                    str(s.get("status")),
                    _number(s.get("last_value")),
                )
                for mode in (Mode.DRILL, Mode.INCIDENT)
                for s in db.last_slos(plan.name, mode)
            ),
        )

    def _readiness(
        self, db: PlanFigures, plan: str
    ) -> tuple[float, tuple[CheckState, ...], dict[str, float]]:
        latest = db.latest_readiness(plan)
        if latest is None:
            return 0.0, (), {}
        snapshot_id, checked_at = latest
        with self._lock:
            cached = self._reports.get(plan)
        if cached is None or cached[0] != snapshot_id:
            report = db.readiness_report(snapshot_id)
            cached = (snapshot_id, *_parse_report(report))
            with self._lock:
                self._reports[plan] = cached
        return _ts(_aware(checked_at)), cached[1], cached[2]


def _parse_report(report: Mapping[str, Any]) -> tuple[tuple[CheckState, ...], dict[str, float]]:
    checks, lags = [], {}
    for result in report.get("results", ()):
        checks.append(
            CheckState(
                check=str(result["id"]),
                category=str(result.get("category", "")),
                blocking=bool(result.get("blocking")),
                status=str(result.get("status", Status.ERROR)),
            )
        )
        if result["id"] == "data.rpo":
            for row in (result.get("evidence") or {}).get("datasets", ()):
                if isinstance(row.get("lag_s"), int | float):
                    lags[str(row["name"])] = float(row["lag_s"])
    return tuple(checks), lags


def _last_measured(db: PlanFigures, plan: str, mode: Mode) -> RunFigures | None:
    row = db.last_measured(plan, mode)
    if row is None:
        return None
    finished_at, rto, client_rto, full_capacity, rpo, detection, preemption, carry_ratio = row
    return RunFigures(
        mode=str(mode),
        finished_at=_ts(_aware(finished_at)),
        rto_s=float(rto),
        client_rto_s=None if client_rto is None else float(client_rto),
        full_capacity_s=None if full_capacity is None else float(full_capacity),
        rpo_s={k: float(v) for k, v in (rpo or {}).items() if isinstance(v, int | float)},
        detection_s=None if detection is None else float(detection),
        preemption_s=None if preemption is None else float(preemption),
        carry_ratio=None if carry_ratio is None else float(carry_ratio),
    )


def _last_drill_success(db: PlanFigures, plan: str) -> float:
    """When the last drill that counts for the cadence ended (as the cadence check reads it)."""
    row = db.last_drill_success(plan)
    if row is None:
        return 0.0
    finished_at, started_at = row
    return _ts(_aware(finished_at or started_at))


def _unfinished(db: PlanFigures, now: dt.datetime) -> dict[str, _Unfinished]:
    """Runs not finished (ix_run_finished), each in progress while its lease is held."""
    rows = db.unfinished_runs()
    if not rows:
        return {}
    held = {run_id for run_id, expires_at in db.lease_expiries() if _aware(expires_at) > now}
    found: dict[str, _Unfinished] = {}
    for run_id, plan, mode, started_at in rows:
        entry = found.setdefault(plan, _Unfinished())
        counts = entry.in_progress if run_id in held else entry.stuck
        counts[str(mode)] = counts.get(str(mode), 0) + 1
        started = _ts(_aware(started_at))
        if entry.oldest is None or started < entry.oldest:
            found[plan] = _Unfinished(entry.in_progress, entry.stuck, started)
    return found
