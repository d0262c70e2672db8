"""The `readiness-check` flow: the plan's readiness checks as Prefect tasks.

Thin by design: the checks, their runner (with each check's deadline) and the
rendering live in drills/; this file only makes each check a task run and
publishes the artifacts.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from typing import Any

from prefect import Flow, flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from drills.checks import (
    CheckRegistry,
    CheckResult,
    CheckSpec,
    ReadinessReport,
    markdown,
    rows,
    run_readiness,
    run_readiness_all,
    verdict,
)
from drills.errors import PlanError
from drills.evidence import export_if_due, signed_history
from drills.orchestrator import gather
from drills.plan import default_plan_patterns, load_plan, parse_duration, plan_paths
from drills.plan import only_applications as application_view
from drills.store import HistoryStore, prune_if_due
from flows.artifacts import artifact_key
from flows.events import notices_as_events

__all__ = [
    "artifact_key", "keep_checkpoints", "prune_history", "publish", "readiness_check",
    "readiness_flow",
]  # fmt: skip


@task(name="check", task_run_name="{check_id}", cache_policy=NO_CACHE, retries=0)
def check_task(check_id: str, run: Callable[[], CheckResult]) -> CheckResult:
    return run()


def as_task(spec: CheckSpec, run: Callable[[], CheckResult]) -> CheckResult:
    """The runner's CheckCall: each check shows as a task run named after it."""
    return check_task(spec.id, run)


@task(name="publish", cache_policy=NO_CACHE)
def publish(report: ReadinessReport, name: str | None = None) -> None:
    """The report's table and summary, keyed per plan (or per application: ``name``)."""
    name = name or report.plan
    create_table_artifact(
        rows(report),
        key=artifact_key("readiness", name),
        description=f"Readiness of {name}: {verdict(report)}",
    )
    create_markdown_artifact(markdown(report), key=artifact_key("readiness-summary", name))


@task(name="prune-history", cache_policy=NO_CACHE)
def prune_history(store: HistoryStore, older_than: str) -> dict[str, Any] | None:
    """Thin out readiness results older than ``older_than``, once a day at most."""
    done = prune_if_due(store, dt.timedelta(seconds=parse_duration(older_than)))
    return done.to_json() if done is not None else None


def readiness_flow(registry: CheckRegistry | None = None) -> Flow[..., dict[str, Any]]:
    """The flow over ``registry``'s checks (every check of drills by default)."""

    @flow(name="readiness-check", log_prints=False)
    def readiness_check(
        plan: str = "",
        store: bool = True,
        all_plans: bool = False,
        concurrency: int = 8,
        prune_older_than: str | None = None,
        only: str | None = None,
    ) -> dict[str, Any]:
        """Run every readiness check of PLAN concurrently, publish the table, keep the
        snapshot. With all_plans, every plan of DRILLS_PLANS instead (PLAN is not read),
        CONCURRENCY plans at once, shared targets asked once. With prune_older_than
        (e.g. 180d), prune older results once a day. `only`: what a run of that
        application of PLAN would take over (never stored as the plan's snapshot)."""
        if all_plans:
            result = _all_plans(registry, store=store, concurrency=concurrency)
        else:
            result = _one_plan(registry, plan, store=store, only=only)
        if store and prune_older_than:
            pruned = prune_history(signed_history(), prune_older_than)
            if pruned is not None:
                get_run_logger().info("pruned %d old readiness results", pruned["removed"])
        if store:
            keep_checkpoints([plan] if not all_plans else None)
        return result

    return readiness_check


@task(name="keep-checkpoints", cache_policy=NO_CACHE)
def keep_checkpoints(plan_files: list[str] | None) -> int | None:
    """Once a day, copy each plan's chain checkpoint to the place its plan names
    (evidence.checkpoints), outside the store; plans that name none are left out."""
    places = {}
    for path in plan_files if plan_files is not None else _fleet_files():
        try:
            found = load_plan(path)
        except PlanError:
            continue  # the readiness run above has said why
        if found.evidence.checkpoints:
            places[found.name] = found.evidence.checkpoints
    if not places:
        return None
    written = export_if_due(signed_history(), places)
    if written is not None:
        get_run_logger().info("%d chain checkpoint(s) kept outside the store", written)
    return written


def _fleet_files() -> tuple[str, ...]:
    # As `drills readiness --all` reads them: the lab's plan if any, then plans/.
    return plan_paths(os.environ.get("DRILLS_PLANS"), default_plan_patterns())


def _one_plan(
    registry: CheckRegistry | None, plan: str, *, store: bool, only: str | None = None
) -> dict[str, Any]:
    drill_plan = application_view(load_plan(plan), only or None)
    with notices_as_events():
        report = run_readiness(
            drill_plan, history=signed_history(), store=store, registry=registry,
            call=as_task, placement=gather("worker"),
        )  # fmt: skip
    publish(report, drill_plan.lease_name)
    get_run_logger().info(
        "%s: %s, %d blocking", drill_plan.lease_name, verdict(report), len(report.blocking)
    )
    return report.to_json()


def _all_plans(registry: CheckRegistry | None, *, store: bool, concurrency: int) -> dict[str, Any]:
    logger = get_run_logger()
    with notices_as_events():
        results = run_readiness_all(
            _fleet_files(),
            history=signed_history() if store else None,
            concurrency=concurrency,
            registry=registry,
        )
    for result in results:
        if result.report is not None:
            publish(result.report)
        logger.info(
            "%s: %s", result.plan, verdict(result.report) if result.report else result.error
        )
    return {"ok": all(r.ok for r in results), "plans": [r.to_json() for r in results]}


readiness_check = readiness_flow()
