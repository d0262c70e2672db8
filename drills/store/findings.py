"""The queries of findings: the runs they are folded from, and the open findings of each
plan counted in the database, one statement a backend.

Each (plan, kind, key)'s newest observation, and how many of those failed: the open findings
as drills.evidence.findings.fold counts them (a finding stays open until a later run passes
the same check or step), without every run read into Python. Both statements unpack the
runs' JSON the way ``observations`` reads it: a check by its id, a step by "phase / step",
a missing name as "None"; where one run observed the same key twice, the later position in
its arrays (json_each's key, WITH ORDINALITY) has the last word, as in the fold. A
succeeded real drill passes ``drill.cadence`` whatever its T0 said (``proves_cadence``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from sqlalchemy import TextClause, bindparam, func, select, text
from sqlalchemy.orm import load_only

from drills.store.history import HistoryStore
from drills.store.models import DrillRun

T = TypeVar("T")

SQLITE = text("""
WITH obs AS (
  SELECT r.plan AS plan, 'readiness' AS kind,
         coalesce(json_extract(j.value, '$.id'), 'None') AS key,
         json_extract(j.value, '$.status') IN ('fail', 'error')
           AND NOT (coalesce(json_extract(j.value, '$.id'), '') = 'drill.cadence'
                    AND r.mode = 'drill' AND NOT r.dry_run AND r.status = 'succeeded') AS failed,
         r.started_at AS at, r.id AS run, j.key AS n, 0 AS m
  FROM drill_runs r, json_each(r.readiness, '$.results') j
  WHERE r.plan IN :plans AND json_extract(j.value, '$.status') IN ('fail', 'error', 'pass', 'warn')
  UNION ALL
  SELECT r.plan, 'step',
         coalesce(json_extract(p.value, '$.name'), 'None') || ' / '
           || coalesce(json_extract(s.value, '$.name'), 'None'),
         json_extract(s.value, '$.status') = 'failed', r.started_at, r.id, p.key, s.key
  FROM drill_runs r, json_each(r.timeline) p, json_each(p.value, '$.steps') s
  WHERE r.plan IN :plans AND json_extract(s.value, '$.status') IN ('ok', 'failed')
), newest AS (
  SELECT plan, failed,
         row_number() OVER (PARTITION BY plan, kind, key
                            ORDER BY at DESC, run DESC, n DESC, m DESC) AS place
  FROM obs
)
SELECT plan, count(*) FROM newest WHERE place = 1 AND failed GROUP BY plan
""").bindparams(bindparam("plans", expanding=True))

# The json columns are cast to jsonb once per run: each json operator would parse the text
# again. A non-array (JSON null, an object) unpacks to nothing, as `or []` does in Python.
POSTGRESQL = text("""
WITH runs AS (
  SELECT r.plan, r.started_at AS at, r.id AS run,
         (r.mode = 'drill' AND NOT r.dry_run AND r.status = 'succeeded') AS drilled,
         r.readiness::jsonb -> 'results' AS results, r.timeline::jsonb AS timeline
  FROM drill_runs r
  WHERE r.plan IN :plans
), obs AS (
  SELECT r.plan, 'readiness' AS kind, coalesce(c.value ->> 'id', 'None') AS key,
         c.value ->> 'status' IN ('fail', 'error')
           AND NOT (coalesce(c.value ->> 'id', '') = 'drill.cadence' AND r.drilled) AS failed,
         r.at, r.run, c.n AS n, 0::bigint AS m
  FROM runs r
  CROSS JOIN LATERAL jsonb_array_elements(
    CASE jsonb_typeof(r.results) WHEN 'array' THEN r.results END
  ) WITH ORDINALITY AS c(value, n)
  WHERE c.value ->> 'status' IN ('fail', 'error', 'pass', 'warn')
  UNION ALL
  SELECT r.plan, 'step',
         coalesce(p.value ->> 'name', 'None') || ' / ' || coalesce(s.value ->> 'name', 'None'),
         s.value ->> 'status' = 'failed', r.at, r.run, p.n, s.n
  FROM runs r
  CROSS JOIN LATERAL jsonb_array_elements(
    CASE jsonb_typeof(r.timeline) WHEN 'array' THEN r.timeline END
  ) WITH ORDINALITY AS p(value, n)
  CROSS JOIN LATERAL jsonb_array_elements(
    CASE jsonb_typeof(p.value -> 'steps') WHEN 'array' THEN p.value -> 'steps' END
  ) WITH ORDINALITY AS s(value, n)
  WHERE s.value ->> 'status' IN ('ok', 'failed')
), newest AS (
  SELECT DISTINCT ON (plan, kind, key) plan, failed FROM obs
  ORDER BY plan, kind, key, at DESC, run DESC, n DESC, m DESC
)
SELECT plan, count(*) FROM newest WHERE failed GROUP BY plan
""").bindparams(bindparam("plans", expanding=True))

# The planner cannot see how few elements the runs' arrays hold, guesses a hundred a run,
# and then spends seconds compiling the statement (JIT) to save milliseconds; the sort of
# every observation fits in memory at a fleet's size instead of spilling to disk.
POSTGRESQL_SETTINGS = (text("SET LOCAL jit = off"), text("SET LOCAL work_mem = '64MB'"))

OPEN_COUNTS: dict[str, tuple[TextClause, tuple[TextClause, ...]]] = {
    "sqlite": (SQLITE, ()),
    "postgresql": (POSTGRESQL, POSTGRESQL_SETTINGS),
}


def runs_oldest_first(
    store: HistoryStore, plan: str | None, until: dt.datetime | None
) -> list[DrillRun]:
    """Every run of ``plan`` (or of every plan) started by ``until``, oldest first."""
    query = select(DrillRun).order_by(DrillRun.started_at, DrillRun.id)
    if plan is not None:
        query = query.where(DrillRun.plan == plan)
    if until is not None:
        query = query.where(DrillRun.started_at <= until)
    with store.session() as s:
        return list(s.scalars(query).all())


def counted_in_database(store: HistoryStore, plans: Sequence[str]) -> dict[str, int] | None:
    """Open findings of each plan (plans with none left out), by the backend's statement in
    one transaction; None for a backend without one."""
    in_database = OPEN_COUNTS.get(store.engine.dialect.name)
    if in_database is None:
        return None
    statement, settings = in_database
    with store.engine.connect() as conn:
        for setting in settings:
            conn.execute(setting)
        rows = conn.execute(statement, {"plans": list(plans)})
        return {plan: count for plan, count in rows}


def fold_runs_of(
    store: HistoryStore, plans: Sequence[str], fold: Callable[[Iterable[DrillRun]], T]
) -> T:
    """``fold`` of every run of ``plans``, oldest first, each with only what findings read
    loaded, streamed to it in one transaction."""
    query = (
        select(DrillRun)
        .options(load_only(DrillRun.id, DrillRun.plan, DrillRun.started_at, DrillRun.t0,
                           DrillRun.mode, DrillRun.dry_run, DrillRun.status,
                           DrillRun.readiness, DrillRun.timeline))
        .where(DrillRun.plan.in_(plans))
        .order_by(DrillRun.started_at, DrillRun.id)
    )  # fmt: skip
    with store.session() as s:
        return fold(s.scalars(query))


def history_version(store: HistoryStore) -> tuple[object, ...]:
    """What changes when a run is added or ends: a key for results read from every run
    (three index steps, never a scan)."""
    query = select(func.count(), func.max(DrillRun.started_at), func.max(DrillRun.finished_at))
    with store.engine.connect() as conn:
        return tuple(conn.execute(query).one())
