"""Run a plan's readiness checks and keep the snapshot: the one entry point for the
CLI, the Prefect flow, the drill's preflight and the dashboard."""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Callable, Iterable

from drills.checks.base import CheckResult, CheckSpec
from drills.checks.catalog import load_checks
from drills.checks.runner import ReadinessReport, run_checks
from drills.plan import DrillPlan
from drills.store.history import HistoryStore
from drills.targets.sites import Targets

log = logging.getLogger("drills.checks.readiness")


def select_checks(only: Iterable[str] = (), categories: Iterable[str] = ()) -> list[CheckSpec]:
    return load_checks().select(only, categories)


def check_context(
    plan: DrillPlan,
    targets: Targets,
    history: HistoryStore | None,
    *,
    now: dt.datetime | None = None,
    fingerprint_key: bytes | None = None,
) -> dict[str, object]:
    return {
        "plan": plan,
        "targets": targets,
        "history": history,
        "now": now or dt.datetime.now(dt.UTC),
        # A fresh key per run: fingerprints can be compared within a run, never across.
        "fingerprint_key": fingerprint_key or os.urandom(32),
    }


def run_readiness(
    plan: DrillPlan,
    *,
    history: HistoryStore | None = None,
    only: Iterable[str] = (),
    categories: Iterable[str] = (),
    store: bool = True,
    on_result: Callable[[CheckResult], None] | None = None,
) -> ReadinessReport:
    """Run the selected checks concurrently.

    The snapshot is stored when a history store is given and every check ran: a
    partial run (``only``/``categories``) must not pass for the plan's readiness.
    """
    specs = select_checks(only, categories)
    with Targets(plan) as targets:
        report = run_checks(
            specs, check_context(plan, targets, history), plan_name=plan.name, on_result=on_result
        )
    if history is not None and store and not specs_filtered(only, categories):
        history.save_readiness(
            plan.name, report.checked_at, report.ok, len(report.blocking), report.to_json()
        )
    log.info(
        "readiness of %s: %d checks, %d blocking",
        plan.name,
        len(report.results),
        len(report.blocking),
    )
    return report


def specs_filtered(only: Iterable[str], categories: Iterable[str]) -> bool:
    return bool(list(only) or list(categories))
