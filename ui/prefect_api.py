"""What the dashboard asks of Prefect: is it there, which runs are going, start or cancel one.

Prefect's own exceptions and httpx's are translated here into drills' TargetError,
so pages and drills.takeover.incident never see them.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

import httpx
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.filters import (
    DeploymentFilter,
    DeploymentFilterId,
    FlowRunFilter,
    FlowRunFilterId,
    FlowRunFilterState,
    FlowRunFilterStateType,
)
from prefect.client.schemas.objects import FlowRun, StateType
from prefect.client.schemas.responses import DeploymentResponse, SetStateStatus
from prefect.client.schemas.sorting import FlowRunSort
from prefect.deployments import run_deployment
from prefect.exceptions import ObjectNotFound, PrefectException, PrefectHTTPStatusError
from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.states import Cancelled, Cancelling, State

from drills.errors import TargetError
from drills.takeover.incident import ActiveRun

log = logging.getLogger("drills.ui.prefect")

T = TypeVar("T")
NOT_FINAL = [
    StateType.SCHEDULED,
    StateType.PENDING,
    StateType.RUNNING,
    StateType.PAUSED,
    StateType.CANCELLING,
]


@dataclass(frozen=True)
class DeploymentInfo:
    name: str
    schedules: tuple[str, ...]  # "cron 0 6 1 */3 * (UTC)"; inactive ones say so
    next_run: dt.datetime | None
    plan_parameter: str | None


@dataclass(frozen=True)
class FlowRunInfo:
    id: str
    name: str
    state_type: str  # SCHEDULED, RUNNING, COMPLETED, ...
    state_name: str
    final: bool
    started: dt.datetime | None
    ended: dt.datetime | None
    running_tasks: tuple[str, ...]
    completed_tasks: int


def health(api_url: str, timeout: float = 2.0) -> str | None:
    """None when the Prefect API answers its health check; otherwise why not."""
    try:
        response = httpx.get(f"{api_url}/health", timeout=timeout)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__} from {api_url}"
    if response.status_code != 200:
        return f"{api_url}/health answered {response.status_code}"
    return None


@contextmanager
def _client(api_url: str) -> Iterator[SyncPrefectClient]:
    # Each call names its server explicitly: the dashboard's settings decide, not
    # whichever Prefect profile happens to be active in this thread.
    with (
        temporary_settings(updates={PREFECT_API_URL: api_url}),
        get_client(sync_client=True) as client,
    ):
        yield client


def _call(api_url: str, what: str, body: Callable[[SyncPrefectClient], T]) -> T:
    try:
        with _client(api_url) as client:
            return body(client)
    except ObjectNotFound:
        raise TargetError(f"prefect ({api_url})", f"{what}: not found") from None
    except PrefectHTTPStatusError as exc:
        raise TargetError(
            f"prefect ({api_url})", f"{what}: HTTP {exc.response.status_code}"
        ) from None
    except (httpx.HTTPError, PrefectException) as exc:
        raise TargetError(f"prefect ({api_url})", f"{what}: {type(exc).__name__}") from exc


def _same_plan(parameter: Any, plan_path: str, plan_name: str) -> bool:
    if not isinstance(parameter, str) or not parameter:
        return False
    if parameter == plan_name:
        return True
    return Path(parameter).expanduser().resolve() == Path(plan_path).expanduser().resolve()


def _deployment(client: SyncPrefectClient, name: str) -> DeploymentResponse:
    return client.read_deployment_by_name(name)


def deployment_exists(api_url: str, name: str) -> bool:
    try:
        _call(api_url, f"deployment {name}", lambda c: _deployment(c, name))
    except TargetError as exc:
        if exc.cause.endswith("not found"):
            return False
        raise
    return True


def _runs(
    client: SyncPrefectClient, deployment_id: UUID, states: list[StateType], limit: int
) -> list[FlowRun]:
    return client.read_flow_runs(
        deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id])),
        flow_run_filter=FlowRunFilter(
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=states))
        ),
        sort=FlowRunSort.EXPECTED_START_TIME_ASC,
        limit=limit,
    )


def deployment_info(
    api_url: str, name: str, plan_path: str, plan_name: str
) -> DeploymentInfo | None:
    """A deployment's schedules and the next scheduled run of it for this plan."""

    def read(client: SyncPrefectClient) -> DeploymentInfo | None:
        try:
            deployment = _deployment(client, name)
        except ObjectNotFound:
            return None
        plan = deployment.parameters.get("plan")
        schedules = tuple(
            _describe_schedule(s.schedule) + ("" if s.active else " (paused)")
            for s in deployment.schedules
        )
        upcoming = [
            run
            for run in _runs(client, deployment.id, [StateType.SCHEDULED], 50)
            if _same_plan(run.parameters.get("plan", plan), plan_path, plan_name)
        ]
        next_run = upcoming[0].expected_start_time if upcoming else None
        return DeploymentInfo(name, schedules, next_run, plan if isinstance(plan, str) else None)

    return _call(api_url, f"deployment {name}", read)


def _describe_schedule(schedule: Any) -> str:
    cron = getattr(schedule, "cron", None)
    if cron:
        return f"cron {cron} ({getattr(schedule, 'timezone', None) or 'UTC'})"
    interval = getattr(schedule, "interval", None)
    if interval:
        return f"every {interval}"
    return type(schedule).__name__


def flow_run_info(api_url: str, flow_run_id: str) -> FlowRunInfo:
    def read(client: SyncPrefectClient) -> FlowRunInfo:
        run = client.read_flow_run(UUID(flow_run_id))
        tasks = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])), limit=200
        )
        state = run.state
        return FlowRunInfo(
            id=str(run.id),
            name=run.name,
            state_type=state.type.value if state else "UNKNOWN",
            state_name=(state.name or state.type.value) if state else "unknown",
            final=bool(state and state.is_final()),
            started=run.start_time,
            ended=run.end_time,
            running_tasks=tuple(
                t.name for t in tasks if t.state and t.state.type == StateType.RUNNING
            ),
            completed_tasks=sum(
                1 for t in tasks if t.state and t.state.type == StateType.COMPLETED
            ),
        )

    return _call(api_url, f"flow run {flow_run_id}", read)


def start_deployment(
    api_url: str,
    name: str,
    parameters: dict[str, Any],
    *,
    idempotency_key: str | None = None,
    tags: tuple[str, ...] = (),
) -> str:
    """Create a run of the deployment and return its id without waiting for it."""

    def start(client: SyncPrefectClient) -> str:
        # Called from sync code, run_deployment returns the FlowRun (not a coroutine).
        run: FlowRun = run_deployment(  # type: ignore[assignment]
            name,
            parameters=parameters,
            timeout=0,
            idempotency_key=idempotency_key,
            tags=list(tags),
            as_subflow=False,
        )
        return str(run.id)

    flow_run_id = _call(api_url, f"start {name}", start)
    log.info("started %s: flow run %s", name, flow_run_id)
    return flow_run_id


@dataclass(frozen=True)
class CancelOutcome:
    accepted: bool
    state_name: str  # the flow run's state after the request
    detail: str  # for people: what happens next, or why nothing did


def cancel_flow_run(api_url: str, flow_run_id: str, message: str) -> CancelOutcome:
    """Ask Prefect to cancel a flow run, as its own UI's Cancel button does.

    A run no worker has started yet is Cancelled at once. A started one (running,
    or paused for approval) goes to Cancelling: its worker then stops the process
    with SIGTERM, on which a drill rolls back and an incident stops and reports.
    """

    def cancel(client: SyncPrefectClient) -> CancelOutcome:
        run = client.read_flow_run(UUID(flow_run_id))
        state = run.state
        if state is None or state.is_final() or state.type == StateType.CANCELLING:
            name = (state.name or state.type.value) if state else "unknown"
            return CancelOutcome(False, name, f"the flow run is already {name}")
        started = state.type != StateType.SCHEDULED
        wanted: State[Any] = Cancelling(message=message) if started else Cancelled(message=message)
        result = client.set_flow_run_state(run.id, wanted)
        if result.status != SetStateStatus.ACCEPT:
            reason = getattr(result.details, "reason", None) or result.status.value
            now = state.name or state.type.value
            return CancelOutcome(False, now, f"Prefect refused: {reason}")
        if started:
            detail = "its worker stops the flow run; a drill rolls back before it ends"
        else:
            detail = "it had not started, so nothing was changed"
        return CancelOutcome(True, wanted.name or wanted.type.value, detail)

    outcome = _call(api_url, f"cancel flow run {flow_run_id}", cancel)
    log.info("cancel of flow run %s: %s (%s)", flow_run_id, outcome.state_name, outcome.detail)
    return outcome


class PrefectLauncher:
    """The incident launcher over the `declare-incident` deployment (drills.takeover.incident)."""

    def __init__(self, api_url: str, deployment: str) -> None:
        self.api_url = api_url
        self.deployment = deployment

    def active_runs(self, plan_path: str, plan_name: str) -> list[ActiveRun]:
        def read(client: SyncPrefectClient) -> list[ActiveRun]:
            deployment = _deployment(client, self.deployment)
            return [
                ActiveRun(str(run.id), "prefect", run.state.type.value if run.state else "unknown")
                for run in _runs(client, deployment.id, NOT_FINAL, 200)
                if _same_plan(run.parameters.get("plan"), plan_path, plan_name)
            ]

        return _call(self.api_url, f"runs of {self.deployment}", read)

    def is_finished(self, flow_run_id: str) -> bool | None:
        try:
            return flow_run_info(self.api_url, flow_run_id).final
        except (TargetError, ValueError):
            return None

    def start(self, parameters: dict[str, Any], *, idempotency_key: str) -> str:
        return start_deployment(
            self.api_url,
            self.deployment,
            parameters,
            idempotency_key=idempotency_key,
            tags=("incident",),
        )
