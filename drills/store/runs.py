"""Queries of the runs that their readers need beside HistoryStore's own: a run by its
flow run, pages of runs and their RTO for the dashboard, the runs a period covers."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import load_only

from drills.store.history import HistoryStore, filter_runs
from drills.store.models import DrillRun, details_value

Row = TypeVar("Row")


def run_of_flow_run(store: HistoryStore, flow_run_id: str) -> DrillRun | None:
    """The drill a flow run recorded: the bridge from a Prefect run to its history record."""
    with store.session() as s:
        query = select(DrillRun).where(DrillRun.flow_run_id == flow_run_id).limit(1)
        return s.scalars(query).first()


def first_run_since(
    store: HistoryStore, plan: str, mode: str, since: dt.datetime
) -> DrillRun | None:
    """The first run of ``mode`` on ``plan`` that started at ``since`` or later."""
    with store.session() as s:
        return s.scalars(
            select(DrillRun)
            .where(DrillRun.plan == plan, DrillRun.mode == mode, DrillRun.started_at >= since)
            .order_by(DrillRun.started_at.asc())
            .limit(1)
        ).first()


def runs_page(
    store: HistoryStore,
    *,
    plan: str | None,
    mode: str | None,
    verdict: str | None,
    page: int,
    size: int,
    row: Callable[[DrillRun], Row],
) -> tuple[list[Row], bool]:
    """One page of runs, newest first, each as ``row`` makes it, and whether another page
    follows.

    Ids first, rows second: sorting only the narrow columns keeps SQLite from reading
    every run's timeline and readiness (kilobytes each) just to order them.
    """
    ids_query = (
        filter_runs(select(DrillRun.id), plan=plan, mode=mode, verdict=verdict)
        .order_by(DrillRun.started_at.desc(), DrillRun.id)
        .limit(size + 1)
        .offset(page * size)
    )
    with store.session() as s:
        ids = list(s.scalars(ids_query).all())
        chosen = select(DrillRun).where(DrillRun.id.in_(ids[:size]))
        runs = {r.id: r for r in s.scalars(chosen)}
    return [row(runs[i]) for i in ids[:size] if i in runs], len(ids) > size


def rto_rows(
    store: HistoryStore, *, plan: str | None, mode: str | None, limit: int
) -> list[tuple[Any, ...]]:
    """The latest ``limit`` finished runs (dry runs left out), oldest first, each as (id,
    plan, started_at, verdict, rto_seconds, rto target, full capacity seconds, forecast
    RTO seconds, mode)."""
    latest = (
        filter_runs(select(DrillRun.id), plan=plan, mode=mode)
        .where(DrillRun.dry_run.is_(False), DrillRun.finished_at.is_not(None))
        .order_by(DrillRun.started_at.desc())
        .limit(limit)
    ).scalar_subquery()
    # The JSON values are read for the chosen runs only, not for every run sorted.
    target = details_value("measurement", "rto_target_seconds").as_float()
    full_capacity = details_value("measurement", "full_capacity_seconds").as_float()
    forecast = details_value("forecast", "rto_seconds").as_float()
    query = (
        select(
            DrillRun.id,
            DrillRun.plan,
            DrillRun.started_at,
            DrillRun.verdict,
            DrillRun.rto_seconds,
            target,
            full_capacity,
            forecast,
            DrillRun.mode,
        )
        .where(DrillRun.id.in_(latest))
        .order_by(DrillRun.started_at)
    )
    with store.session() as s:
        return [tuple(row) for row in s.execute(query).all()]


def plan_names(store: HistoryStore) -> list[str]:
    """Every plan name that has a run in the store, sorted."""
    with store.session() as s:
        return sorted(s.scalars(select(DrillRun.plan).distinct()).all())


def coverage_runs_since(store: HistoryStore, since: dt.datetime) -> list[DrillRun]:
    """Runs started at ``since`` or later, oldest first, with only what coverage reads
    loaded (plan, mode, dry run, timeline): a year of runs without their reports."""
    query = (
        select(DrillRun)
        .options(
            load_only(
                DrillRun.plan, DrillRun.mode, DrillRun.dry_run, DrillRun.timeline, DrillRun.status
            )
        )
        .where(DrillRun.started_at >= since)
        .order_by(DrillRun.started_at)
    )
    with store.session() as s:
        return list(s.scalars(query).all())
