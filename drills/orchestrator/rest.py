"""The few calls drills makes to a Prefect server's REST API, over plain HTTP.

drills/ must not import prefect (the core runs without a server), so `drills serve`
talks to the server the way any client may: its documented REST API. Transport
errors become :class:`TemporaryError`, refusals :class:`PermanentError`, with the
endpoint named and no credential repeated.
"""

from __future__ import annotations

import base64
import os
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from drills.errors import PermanentError, TemporaryError
from drills.plan.durations import format_duration
from drills.targets.retry import retry_call

FINAL_STATES = frozenset({"COMPLETED", "FAILED", "CRASHED", "CANCELLED"})


@dataclass(frozen=True)
class Deployment:
    id: str
    name: str
    flow_name: str
    schedules: tuple[str, ...]
    paused: bool
    parameters: dict[str, Any]


@dataclass(frozen=True)
class WorkerStatus:
    name: str
    status: str
    last_heartbeat: str | None


@dataclass(frozen=True)
class FlowRunState:
    id: str
    name: str
    state_type: str
    state_name: str
    message: str

    @property
    def final(self) -> bool:
        return self.state_type in FINAL_STATES


def auth_headers() -> dict[str, str]:
    """Credentials for a server of your own, from the same variables the prefect CLI reads."""
    if key := os.environ.get("PREFECT_API_KEY"):
        return {"Authorization": f"Bearer {key}"}
    if basic := os.environ.get("PREFECT_API_AUTH_STRING"):
        return {"Authorization": "Basic " + base64.b64encode(basic.encode()).decode()}
    return {}


def _describe_schedule(item: dict[str, Any]) -> str:
    schedule = item.get("schedule") or {}
    zone = schedule.get("timezone") or "UTC"
    if "cron" in schedule:
        text = f"cron {schedule['cron']} ({zone})"
    elif "interval" in schedule:
        text = f"every {format_duration(float(schedule['interval']))}"
    else:
        text = f"rrule {schedule.get('rrule', '?')}"
    return text if item.get("active", True) else f"{text}, inactive"


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

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        # A busy server (SQLite locked) answers 503 for a moment; every call here is a read
        # or carries an idempotency key, so retrying cannot do anything twice.
        return retry_call(lambda: self._call_once(method, path, body))

    def _call_once(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        where = f"prefect api {self.api_url}"
        try:
            response = self._client.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise TemporaryError(where, f"{method} {path}: {type(exc).__name__}") from None
        if response.status_code == 404:
            raise PermanentError(where, f"{method} {path}: not found")
        if response.status_code >= 500:
            raise TemporaryError(where, f"{method} {path}: HTTP {response.status_code}")
        if response.status_code >= 400:
            detail = response.text.strip()[:300]
            raise PermanentError(where, f"{method} {path}: HTTP {response.status_code} {detail}")
        return response.json() if response.content else None

    def healthy(self) -> bool:
        try:
            return self._client.get("health", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def work_pool_exists(self, name: str) -> bool:
        try:
            self._call("GET", f"work_pools/{name}")
        except PermanentError as exc:
            if exc.cause.endswith("not found"):
                return False
            raise
        return True

    def workers(self, pool: str) -> list[WorkerStatus]:
        found = self._call("POST", f"work_pools/{pool}/workers/filter", {})
        return [
            WorkerStatus(w["name"], w.get("status") or "UNKNOWN", w.get("last_heartbeat_time"))
            for w in found
        ]

    def deployments(self) -> list[Deployment]:
        found = self._call("POST", "deployments/filter", {"sort": "NAME_ASC"})
        flows = {f["id"]: f["name"] for f in self._call("POST", "flows/filter", {})}
        return [self._deployment(d, flows.get(d["flow_id"], "?")) for d in found]

    def deployment(self, name: str) -> Deployment:
        """By ``flow/deployment``, or by the deployment's name alone when that is unique."""
        if "/" in name:
            flow_name, _, short = name.partition("/")
            found = self._call("GET", f"deployments/name/{flow_name}/{short}")
            return self._deployment(found, flow_name)
        matches = [d for d in self.deployments() if d.name == name]
        where = f"prefect api {self.api_url}"
        if not matches:
            raise PermanentError(where, f"no deployment named {name!r}")
        if len(matches) > 1:
            names = ", ".join(f"{d.flow_name}/{d.name}" for d in matches)
            raise PermanentError(where, f"{name!r} is ambiguous: {names}")
        return matches[0]

    @staticmethod
    def _deployment(data: dict[str, Any], flow_name: str) -> Deployment:
        return Deployment(
            id=data["id"],
            name=data["name"],
            flow_name=flow_name,
            schedules=tuple(_describe_schedule(s) for s in data.get("schedules") or []),
            paused=bool(data.get("paused")),
            parameters=dict(data.get("parameters") or {}),
        )

    def create_flow_run(self, deployment_id: str, parameters: dict[str, Any]) -> FlowRunState:
        body = {
            "parameters": parameters,
            "state": {"type": "SCHEDULED"},
            "idempotency_key": uuid.uuid4().hex,  # a retried POST returns the same run
        }
        return self._state(self._call("POST", f"deployments/{deployment_id}/create_flow_run", body))

    def active_flow_runs(self) -> list[FlowRunState]:
        """Flow runs a worker is executing or holding: stopping it would interrupt them."""
        states = {"type": {"any_": ["PENDING", "RUNNING", "PAUSED", "CANCELLING"]}}
        found = self._call("POST", "flow_runs/filter", {"flow_runs": {"state": states}})
        return [self._state(run) for run in found]

    def flow_run(self, flow_run_id: str) -> FlowRunState:
        return self._state(self._call("GET", f"flow_runs/{flow_run_id}"))

    @staticmethod
    def _state(data: dict[str, Any]) -> FlowRunState:
        state = data.get("state") or {}
        return FlowRunState(
            id=data["id"],
            name=data.get("name") or "",
            state_type=state.get("type") or "UNKNOWN",
            state_name=state.get("name") or "",
            message=state.get("message") or "",
        )
