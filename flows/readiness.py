"""The `readiness-check` flow: the plan's readiness checks as Prefect tasks.

Thin by design: the checks, their runner and the rendering live in drills/;
this file only maps them onto tasks and artifacts.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from drills.checks.base import CheckResult
from drills.checks.readiness import check_context, select_checks
from drills.checks.runner import ReadinessReport, run_one
from drills.checks.view import markdown, rows, verdict
from drills.plan import load_plan
from drills.store.history import HistoryStore
from drills.targets.sites import Targets
from flows.artifacts import artifact_key

__all__ = ["artifact_key", "publish", "readiness_check", "run_check"]


@task(name="check", task_run_name="{check_id}", cache_policy=NO_CACHE, retries=0)
def run_check(check_id: str, context: dict[str, Any]) -> CheckResult:
    return run_one(select_checks(only=[check_id])[0], context)


@task(name="publish", cache_policy=NO_CACHE)
def publish(report: ReadinessReport, store: bool) -> None:
    create_table_artifact(
        rows(report),
        key=artifact_key("readiness", report.plan),
        description=f"Readiness of {report.plan}: {verdict(report)}",
    )
    create_markdown_artifact(markdown(report), key=artifact_key("readiness-summary", report.plan))
    if store:
        HistoryStore().save_readiness(
            report.plan, report.checked_at, report.ok, len(report.blocking), report.to_json()
        )


@flow(name="readiness-check", log_prints=False)
def readiness_check(plan: str, store: bool = True) -> dict[str, Any]:
    """Run every readiness check of PLAN concurrently, publish the table, keep the snapshot."""
    logger = get_run_logger()
    drill_plan = load_plan(plan)
    with Targets(drill_plan) as targets:
        context = check_context(drill_plan, targets, HistoryStore())
        checked_at = dt.datetime.now(dt.UTC)
        futures = [run_check.submit(spec.id, context) for spec in select_checks()]
        results = tuple(f.result() for f in futures)
    report = ReadinessReport(drill_plan.name, checked_at, results)
    publish(report, store)
    logger.info("%s: %s, %d blocking", drill_plan.name, verdict(report), len(report.blocking))
    return report.to_json()
