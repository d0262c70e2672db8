"""What the CLI and the dashboard read of flow runs, and cancel: a plan's runs, a
deployment's next one scheduled, a run's progress, and the drill it recorded.

Written once over :class:`PrefectRest`, so `drills serve run` and the dashboard agree
on what a run's state means and on which runs belong to a plan.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drills.orchestrator.rest import Deployment, FlowRunState, PrefectRest
from drills.store.history import HistoryStore
from drills.store.models import DrillRun
from drills.store.runs import run_of_flow_run

log = logging.getLogger("drills.orchestrator.flow_runs")


def same_plan(parameter: Any, plan_path: str, plan_name: str) -> bool:
    """Whether a flow run's ``plan`` parameter names this plan, by name or by file."""
    if not isinstance(parameter, str) or not parameter:
        return False
    if parameter == plan_name:
        return True
    return Path(parameter).expanduser().resolve() == Path(plan_path).expanduser().resolve()


def runs_of_plan(
    api: PrefectRest, deployment: Deployment, states: Iterable[str], plan_path: str, plan_name: str
) -> list[FlowRunState]:
    # A run that was given no plan runs the deployment's default one.
    default = deployment.parameters.get("plan")
    return [
        run
        for run in api.flow_runs(deployment.id, states)
        if same_plan(run.parameters.get("plan", default), plan_path, plan_name)
    ]


@dataclass(frozen=True)
class DeploymentInfo:
    name: str
    schedules: tuple[str, ...]
    next_run: dt.datetime | None  # the next scheduled run of it for the plan asked about
    plan_parameter: str | None


def deployment_info(
    api: PrefectRest, name: str, plan_path: str, plan_name: str
) -> DeploymentInfo | None:
    """A deployment's schedules and its next scheduled run for this plan; None if no such
    deployment."""
    deployment = api.find_deployment(name)
    if deployment is None:
        return None
    upcoming = runs_of_plan(api, deployment, ["SCHEDULED"], plan_path, plan_name)
    plan = deployment.parameters.get("plan")
    return DeploymentInfo(
        name,
        deployment.schedules,
        upcoming[0].expected_start if upcoming else None,
        plan if isinstance(plan, str) else None,
    )


@dataclass(frozen=True)
class FlowRunProgress(FlowRunState):
    running_tasks: tuple[str, ...] = ()
    completed_tasks: int = 0


def flow_run_progress(api: PrefectRest, flow_run_id: str) -> FlowRunProgress:
    """The flow run's state and how far its tasks got: what a live view shows."""
    run = api.flow_run(flow_run_id)
    tasks = api.task_run_states(run.id)
    fields = {f.name: getattr(run, f.name) for f in dataclasses.fields(run)}
    return FlowRunProgress(
        **fields,
        running_tasks=tuple(name for name, state in tasks if state == "RUNNING"),
        completed_tasks=sum(1 for _, state in tasks if state == "COMPLETED"),
    )


@dataclass(frozen=True)
class CancelOutcome:
    accepted: bool
    state_name: str  # the flow run's state after the request
    detail: str  # for people: what happens next, or why nothing did


def cancel_flow_run(api: PrefectRest, flow_run_id: str, message: str) -> CancelOutcome:
    """Ask Prefect to cancel a flow run, as its own UI's Cancel button does.

    A run no worker has started yet is Cancelled at once. A started one (running,
    or paused for approval) goes to Cancelling: its worker then stops the process
    with SIGTERM, on which a drill rolls back and an incident stops and reports.
    """
    run = api.flow_run(flow_run_id)
    if run.final or run.state_type in ("CANCELLING", "UNKNOWN"):
        return CancelOutcome(False, run.state_name, f"the flow run is already {run.state_name}")
    started = run.state_type != "SCHEDULED"
    wanted = ("CANCELLING", "Cancelling") if started else ("CANCELLED", "Cancelled")
    change = api.set_flow_run_state(run.id, *wanted, message)
    if not change.accepted and change.state_type in ("CANCELLED", "CANCELLING"):
        # Prefect may answer REJECT with the run cancelled anyway: a Cancelling asked for
        # a run no worker holds becomes Cancelled (BypassCancellingFlowRunsWithNoInfra).
        state_name = change.state_type.capitalize()
        outcome = CancelOutcome(True, state_name, f"Prefect made it {state_name}")
    elif not change.accepted:
        outcome = CancelOutcome(False, run.state_name, f"Prefect refused: {change.reason}")
    elif started:
        detail = "its worker stops the flow run; a drill rolls back before it ends"
        outcome = CancelOutcome(True, wanted[1], detail)
    else:
        outcome = CancelOutcome(True, wanted[1], "it had not started, so nothing was changed")
    log.info("cancel of flow run %s: %s (%s)", run.id, outcome.state_name, outcome.detail)
    return outcome


def drill_run_of(history: HistoryStore, flow_run_id: str) -> DrillRun | None:
    """The drill a flow run recorded: the bridge from a Prefect run to its history record."""
    return run_of_flow_run(history, flow_run_id)
