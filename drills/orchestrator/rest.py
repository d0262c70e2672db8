"""The one client drills has for a Prefect server: its REST API, over plain HTTP.

drills/ must not import prefect (the core runs without a server, and importing it
costs the CLI seconds), so `drills serve`, `drills serve run` and the dashboard all
talk to the server the way any client may: its documented REST API. Transport
errors become :class:`TemporaryError`, refusals :class:`PermanentError`, with the
endpoint named and no credential repeated.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx

from drills.errors import PermanentError, TemporaryError
from drills.targets.retry import retry_call
from drills.timefmt import duration

# Prefect's terminal state types: nothing happens to a run in one of these any more.
FINAL_STATES = frozenset({"COMPLETED", "FAILED", "CRASHED", "CANCELLED"})
NOT_FINAL_STATES = ("SCHEDULED", "PENDING", "RUNNING", "PAUSED", "CANCELLING")


def is_final(state_type: str) -> bool:
    """Whether a flow run in this state type has finished, whatever the outcome."""
    return state_type in FINAL_STATES


@dataclass(frozen=True)
class Deployment:
    id: str
    name: str
    flow_name: str
    schedules: tuple[str, ...]  # "cron 0 3 1 1,4,7,10 * (UTC)"; inactive ones say so
    paused: bool
    parameters: dict[str, Any]

    @property
    def full_name(self) -> str:
        return f"{self.flow_name}/{self.name}"


@dataclass(frozen=True)
class WorkerStatus:
    name: str
    status: str
    last_heartbeat: str | None


@dataclass(frozen=True)
class FlowRunState:
    id: str
    name: str
    state_type: str  # SCHEDULED, RUNNING, COMPLETED, ...
    state_name: str  # Prefect's name for it ("Late", "AwaitingRetry"), else the type
    message: str
    parameters: dict[str, Any] = field(default_factory=dict)
    expected_start: dt.datetime | None = None
    started: dt.datetime | None = None
    ended: dt.datetime | None = None

    @property
    def final(self) -> bool:
        return is_final(self.state_type)


@dataclass(frozen=True)
class StateChange:
    """Prefect's answer to a requested state: accepted, or why not, and the run's state
    type after it ("" when the answer carried none)."""

    accepted: bool
    reason: str
    state_type: str = ""


def auth_headers(api_key: str | None = None, auth_string: str | None = None) -> dict[str, str]:
    """Credentials for a server of your own: those given, else from the same variables
    the prefect CLI reads."""
    if key := api_key or os.environ.get("PREFECT_API_KEY"):
        return {"Authorization": f"Bearer {key}"}
    if basic := auth_string or os.environ.get("PREFECT_API_AUTH_STRING"):
        return {"Authorization": "Basic " + base64.b64encode(basic.encode()).decode()}
    return {}


def describe_schedule(item: dict[str, Any]) -> str:
    """A deployment schedule as people read it: "cron 0 3 1 1,4,7,10 * (UTC)", "every 15 min"."""
    schedule = item.get("schedule") or {}
    zone = schedule.get("timezone") or "UTC"
    if "cron" in schedule:
        text = f"cron {schedule['cron']} ({zone})"
    elif "interval" in schedule:
        text = f"every {duration(float(schedule['interval']))}"
    else:
        text = f"rrule {schedule.get('rrule', '?')}"
    return text if item.get("active", True) else f"{text}, inactive"


def _when(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value) if value else None


def _flow_run(data: dict[str, Any]) -> FlowRunState:
    state = data.get("state") or {}
    state_type = state.get("type") or "UNKNOWN"
    return FlowRunState(
        id=data["id"],
        name=data.get("name") or "",
        state_type=state_type,
        state_name=state.get("name") or state_type,
        message=state.get("message") or "",
        parameters=dict(data.get("parameters") or {}),
        expected_start=_when(data.get("expected_start_time")),
        started=_when(data.get("start_time")),
        ended=_when(data.get("end_time")),
    )


def _deployment(data: dict[str, Any], flow_name: str) -> Deployment:
    return Deployment(
        id=data["id"],
        name=data["name"],
        flow_name=flow_name,
        schedules=tuple(describe_schedule(s) for s in data.get("schedules") or []),
        paused=bool(data.get("paused")),
        parameters=dict(data.get("parameters") or {}),
    )


class PrefectRest:
    def __init__(
        self, api_url: str, *, headers: dict[str, str] | None = None, timeout: float = 10.0
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self._client = httpx.Client(
            base_url=self.api_url + "/", headers=headers or {}, timeout=timeout
        )

    def __enter__(self) -> PrefectRest:
        return self

    def __exit__(self, *_: object) -> None:
        self._client.close()

    @property
    def _where(self) -> str:
        return f"prefect api {self.api_url}"

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        # A busy server (SQLite locked) answers 503 for a moment; every call here is a read,
        # carries an idempotency key, or asks for a state the server checks against the
        # current one, so retrying cannot do anything twice.
        return retry_call(lambda: self._call_once(method, path, body))

    def _call_once(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        try:
            response = self._client.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise TemporaryError(self._where, f"{method} {path}: {type(exc).__name__}") from None
        if response.status_code == 404:
            raise PermanentError(self._where, f"{method} {path}: not found")
        if response.status_code >= 500:
            raise TemporaryError(self._where, f"{method} {path}: HTTP {response.status_code}")
        if response.status_code >= 400:
            detail = response.text.strip()[:300]
            raise PermanentError(
                self._where, f"{method} {path}: HTTP {response.status_code} {detail}"
            )
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:  # a proxy's HTML page, a body cut short
            raise TemporaryError(
                self._where, f"{method} {path}: an answer that is not JSON"
            ) from None

    def _run_id(self, flow_run_id: str) -> str:
        # Ids reach here from URLs people share: only a UUID may become part of a path.
        try:
            return str(uuid.UUID(flow_run_id))
        except ValueError:
            raise PermanentError(self._where, f"{flow_run_id!r} is not a flow run id") from None

    # -- the server -------------------------------------------------------------------

    def health_problem(self, timeout: float = 2.0) -> str | None:
        """None when the server answers its health check; otherwise why not."""
        try:
            response = self._client.get("health", timeout=timeout)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__} from {self.api_url}"
        if response.status_code != 200:
            return f"{self.api_url}/health answered {response.status_code}"
        return None

    def healthy(self) -> bool:
        return self.health_problem() is None

    def work_pool_exists(self, name: str) -> bool:
        try:
            self._call("GET", f"work_pools/{name}")
        except PermanentError as exc:
            if exc.cause.endswith("not found"):
                return False
            raise
        return True

    def set_work_pool_command(self, name: str, command: str) -> None:
        """The command the pool's workers start each flow run with, unless a deployment
        says otherwise (the default of its base job template's ``command`` variable)."""
        template = self._call("GET", f"work_pools/{name}").get("base_job_template") or {}
        variable = template.get("variables", {}).get("properties", {}).get("command")
        if not isinstance(variable, dict):  # a pool type whose workers take no command
            raise PermanentError(self._where, f"work pool {name} has no command variable")
        variable["default"] = command
        self._call("PATCH", f"work_pools/{name}", {"base_job_template": template})

    def workers(self, pool: str) -> list[WorkerStatus]:
        found = self._call("POST", f"work_pools/{pool}/workers/filter", {})
        return [
            WorkerStatus(w["name"], w.get("status") or "UNKNOWN", w.get("last_heartbeat_time"))
            for w in found
        ]

    # -- deployments ------------------------------------------------------------------

    def deployments(self) -> list[Deployment]:
        found = self._call("POST", "deployments/filter", {"sort": "NAME_ASC"})
        flows = {f["id"]: f["name"] for f in self._call("POST", "flows/filter", {})}
        return [_deployment(d, flows.get(d["flow_id"], "?")) for d in found]

    def deployment(self, name: str) -> Deployment:
        """By ``flow/deployment``, or by the deployment's name alone when that is unique."""
        if "/" in name:
            flow_name, _, short = name.partition("/")
            found = self._call("GET", f"deployments/name/{flow_name}/{short}")
            return _deployment(found, flow_name)
        matches = [d for d in self.deployments() if d.name == name]
        if not matches:
            raise PermanentError(self._where, f"no deployment named {name!r}")
        if len(matches) > 1:
            names = ", ".join(d.full_name for d in matches)
            raise PermanentError(self._where, f"{name!r} is ambiguous: {names}")
        return matches[0]

    def find_deployment(self, name: str) -> Deployment | None:
        """The deployment, or None when the server has none of that name."""
        try:
            return self.deployment(name)
        except PermanentError as exc:
            if exc.cause.endswith("not found") or exc.cause.startswith("no deployment"):
                return None
            raise

    def set_schedules(self, deployment_id: str, schedules: list[dict[str, Any]]) -> None:
        """Replace all the deployment's schedules with ``schedules`` (Prefect's
        ``DeploymentScheduleUpdate`` shape); idempotent, so safe to retry."""
        self._call("PATCH", f"deployments/{deployment_id}", {"schedules": schedules})

    # -- flow runs --------------------------------------------------------------------

    def create_flow_run(
        self,
        deployment_id: str,
        parameters: dict[str, Any],
        *,
        idempotency_key: str | None = None,
        tags: Iterable[str] = (),
    ) -> FlowRunState:
        """A scheduled run of the deployment, due now; a worker of its pool picks it up."""
        now = dt.datetime.now(dt.UTC).isoformat()
        body = {
            "parameters": parameters,
            "state": {"type": "SCHEDULED", "state_details": {"scheduled_time": now}},
            "tags": list(tags),
            # A retried POST returns the same run; so does a second click with the same key.
            "idempotency_key": idempotency_key or uuid.uuid4().hex,
        }
        return _flow_run(self._call("POST", f"deployments/{deployment_id}/create_flow_run", body))

    def flow_runs(
        self, deployment_id: str, states: Iterable[str], *, limit: int = 200
    ) -> list[FlowRunState]:
        """Runs of a deployment in the given state types, the soonest due first."""
        body = {
            "deployments": {"id": {"any_": [deployment_id]}},
            "flow_runs": {"state": {"type": {"any_": list(states)}}},
            "sort": "EXPECTED_START_TIME_ASC",
            "limit": limit,
        }
        return [_flow_run(run) for run in self._call("POST", "flow_runs/filter", body)]

    def due_flow_runs(self, deployment_id: str, *, limit: int = 10) -> list[FlowRunState]:
        """Scheduled runs of a deployment that are due now, the latest due first: a run
        declared a moment ago comes before any number left over from long ago (which a
        soonest-first page of ``limit`` would be full of)."""
        now = dt.datetime.now(dt.UTC).isoformat()
        body = {
            "deployments": {"id": {"any_": [deployment_id]}},
            "flow_runs": {
                "state": {"type": {"any_": ["SCHEDULED"]}},
                "expected_start_time": {"before_": now},
            },
            "sort": "EXPECTED_START_TIME_DESC",
            "limit": limit,
        }
        return [_flow_run(run) for run in self._call("POST", "flow_runs/filter", body)]

    def active_flow_runs(self) -> list[FlowRunState]:
        """Flow runs a worker is executing or holding: stopping it would interrupt them."""
        states = {"type": {"any_": ["PENDING", "RUNNING", "PAUSED", "CANCELLING"]}}
        found = self._call("POST", "flow_runs/filter", {"flow_runs": {"state": states}})
        return [_flow_run(run) for run in found]

    def flow_run(self, flow_run_id: str) -> FlowRunState:
        return _flow_run(self._call("GET", f"flow_runs/{self._run_id(flow_run_id)}"))

    def task_run_states(self, flow_run_id: str, *, limit: int = 200) -> list[tuple[str, str]]:
        """(name, state type) of each task run of the flow run."""
        body = {"flow_runs": {"id": {"any_": [self._run_id(flow_run_id)]}}, "limit": limit}
        found = self._call("POST", "task_runs/filter", body)
        return [(t.get("name") or "", (t.get("state") or {}).get("type") or "") for t in found]

    def set_flow_run_state(
        self, flow_run_id: str, state_type: str, name: str, message: str, *, force: bool = False
    ) -> StateChange:
        """Ask for a new state; Prefect's orchestration rules may refuse it.

        With ``force`` the server applies no rules: for the bookkeeping a worker does on
        runs it owns (a dead process's run to Crashed, a cancelled one to Cancelled).
        """
        # One id for the change, however many times the request is sent: when an answer is
        # lost and the retry finds the change already made, Prefect rejects the duplicate
        # and returns the state that carries this id (PreventDuplicateTransitions).
        transition_id = str(uuid.uuid4())
        state = {
            "type": state_type,
            "name": name,
            "message": message,
            "state_details": {"transition_id": transition_id},
        }
        body: dict[str, Any] = {"state": state}
        if force:
            body["force"] = True
        answer = self._call("POST", f"flow_runs/{self._run_id(flow_run_id)}/set_state", body)
        status = answer.get("status") or "?"
        reason = (answer.get("details") or {}).get("reason") or status
        now = answer.get("state") or {}
        ours = (now.get("state_details") or {}).get("transition_id") == transition_id
        return StateChange(status == "ACCEPT" or ours, reason, now.get("type") or "")
