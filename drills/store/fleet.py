"""What the fleet overview reads: each plan's latest facts, in a few queries for all plans.

One statement finds, for every plan at once, the ids of its latest readiness snapshot,
last drill and last drill that counts for the cadence (each a correlated ``LIMIT 1`` on an
index, never a scan of the history); a second and third read those rows' narrow columns;
where each plan serves comes from drills.store.serving (the rules `drills status` uses),
and open findings from drills.evidence.findings. 200 plans cost a handful of round trips.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    String,
    literal,
    select,
    union_all,
)

from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus
from drills.store.models import DrillRun, ReadinessSnapshot, details_value
from drills.store.serving import recorded_serving_of

CHUNK = 400  # plans per statement: SQLite allows 500 terms in one compound SELECT


@dataclass(frozen=True)
class RunFacts:
    id: str
    started_at: dt.datetime
    finished_at: dt.datetime | None
    status: str
    verdict: str | None
    rto_seconds: float | None
    rto_target: float | None


@dataclass(frozen=True)
class ReadinessFacts:
    id: int
    checked_at: dt.datetime
    ok: bool
    blocking: int
    report: dict[str, Any]


@dataclass
class PlanFacts:
    plan: str
    readiness: ReadinessFacts | None = None
    last_drill: RunFacts | None = None
    last_success: RunFacts | None = None  # the last drill that counts for the cadence
    serving: str = "primary"
    open_findings: int = 0  # over the whole history (drills.evidence.findings.open_counts)


def _aware(value: dt.datetime | None) -> dt.datetime | None:
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=dt.UTC)


def _names(chunk: Sequence[str]) -> Any:
    """The plans as a table: one SELECT of a literal per plan, joined by UNION ALL (no
    VALUES list: SQLite cannot name its columns)."""
    return union_all(*[select(literal(n, String(128)).label("plan")) for n in chunk]).subquery()


def _newest_run(plan: ColumnElement[Any], mode: Mode, *where: Any) -> Any:
    """The newest run of ``plan`` in ``mode``, not a dry run (ix_run_plan_mode_started)."""
    return (
        select(DrillRun.id)
        .where(DrillRun.plan == plan, DrillRun.mode == mode, DrillRun.dry_run.is_(False), *where)
        .order_by(DrillRun.started_at.desc())
        .limit(1)
        .scalar_subquery()
    )


def _latest_ids(names: Any) -> Select[Any]:
    plan = names.c.plan
    readiness = (
        select(ReadinessSnapshot.id)
        .where(ReadinessSnapshot.plan == plan)
        .order_by(ReadinessSnapshot.checked_at.desc())
        .limit(1)
        .scalar_subquery()
    )
    proving = [s for s in RunStatus if s.counts_for_cadence]
    return select(
        plan,
        readiness,
        _newest_run(plan, Mode.DRILL, DrillRun.finished_at.is_not(None)),
        _newest_run(plan, Mode.DRILL, DrillRun.status.in_(proving)),
    )


_RUN_COLUMNS = (
    DrillRun.id,
    DrillRun.started_at,
    DrillRun.finished_at,
    DrillRun.status,
    DrillRun.verdict,
    DrillRun.rto_seconds,
    details_value("measurement", "rto_target_seconds").as_float(),
)


def _runs(conn: Connection, ids: set[str]) -> dict[str, RunFacts]:
    if not ids:
        return {}
    rows = conn.execute(select(*_RUN_COLUMNS).where(DrillRun.id.in_(ids))).all()
    return {
        r[0]: RunFacts(r[0], _aware(r[1]), _aware(r[2]), str(r[3]), r[4], r[5], r[6])  # type: ignore[arg-type]
        for r in rows
    }


def _snapshots(conn: Connection, ids: set[int]) -> dict[int, ReadinessFacts]:
    if not ids:
        return {}
    query = select(
        ReadinessSnapshot.id,
        ReadinessSnapshot.checked_at,
        ReadinessSnapshot.ok,
        ReadinessSnapshot.blocking,
        ReadinessSnapshot.report,
    ).where(ReadinessSnapshot.id.in_(ids))
    return {r[0]: ReadinessFacts(r[0], _aware(r[1]), r[2], r[3], r[4]) for r in conn.execute(query)}  # type: ignore[arg-type]


def fleet_facts(store: HistoryStore, plans: Sequence[str]) -> dict[str, PlanFacts]:
    """The latest facts of every plan named, read in a few set-based queries."""
    facts = {name: PlanFacts(name) for name in plans}
    with store.engine.connect() as conn:
        for start in range(0, len(plans), CHUNK):
            names = _names(plans[start : start + CHUNK])
            _fill(conn, names, facts)
    for plan, recorded in recorded_serving_of(store, plans).items():
        facts[plan].serving = recorded.site.value
    return facts


def _fill(conn: Connection, names: Any, facts: dict[str, PlanFacts]) -> None:
    latest = conn.execute(_latest_ids(names)).all()
    runs = _runs(conn, {i for row in latest for i in row[2:4] if i is not None})
    snapshots = _snapshots(conn, {row[1] for row in latest if row[1] is not None})
    for plan, snapshot, drill, success in latest:
        entry = facts[plan]
        entry.readiness = snapshots.get(snapshot) if snapshot is not None else None
        entry.last_drill = runs.get(drill) if drill else None
        entry.last_success = runs.get(success) if success else None
