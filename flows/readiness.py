"""The `readiness-check` flow: the plan's readiness checks as Prefect tasks.

Thin by design: the checks, their runner (with each check's deadline) and the
rendering live in drills/; this file only makes each check a task run and
publishes the artifacts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect import Flow, flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from drills.checks.base import CheckRegistry, CheckResult, CheckSpec
from drills.checks.readiness import run_readiness
from drills.checks.runner import ReadinessReport
from drills.checks.view import markdown, rows, verdict
from drills.orchestrator.placement import gather
from drills.plan import load_plan
from drills.store.history import HistoryStore
from flows.artifacts import artifact_key
from flows.events import notices_as_events

__all__ = ["artifact_key", "publish", "readiness_check", "readiness_flow"]


@task(name="check", task_run_name="{check_id}", cache_policy=NO_CACHE, retries=0)
def check_task(check_id: str, run: Callable[[], CheckResult]) -> CheckResult:
    return run()


def as_task(spec: CheckSpec, run: Callable[[], CheckResult]) -> CheckResult:
    """The runner's CheckCall: each check shows as a task run named after it."""
    return check_task(spec.id, run)


@task(name="publish", cache_policy=NO_CACHE)
def publish(report: ReadinessReport) -> None:
    create_table_artifact(
        rows(report),
        key=artifact_key("readiness", report.plan),
        description=f"Readiness of {report.plan}: {verdict(report)}",
    )
    create_markdown_artifact(markdown(report), key=artifact_key("readiness-summary", report.plan))


def readiness_flow(registry: CheckRegistry | None = None) -> Flow[..., dict[str, Any]]:
    """The flow over ``registry``'s checks (every check of drills by default)."""

    @flow(name="readiness-check", log_prints=False)
    def readiness_check(plan: str, store: bool = True) -> dict[str, Any]:
        """Run every readiness check of PLAN concurrently, publish the table, keep the
        snapshot."""
        logger = get_run_logger()
        drill_plan = load_plan(plan)
        with notices_as_events():
            report = run_readiness(
                drill_plan, history=HistoryStore(), store=store, registry=registry,
                call=as_task, placement=gather("worker"),
            )  # fmt: skip
        publish(report)
        logger.info("%s: %s, %d blocking", drill_plan.name, verdict(report), len(report.blocking))
        return report.to_json()

    return readiness_check


readiness_check = readiness_flow()
