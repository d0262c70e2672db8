"""Asking for the way home: the checks before a failback run starts, and its audit trail.

The dashboard's **Fail back** button and `drills serve run failback` both come here, as
a declaration goes through drills.takeover.incident: the request is checked, refused
exactly when `drills run --mode failback` would refuse (a run in the way, or the plan not
serving from DR), and audited either way, accepted or refused. The run itself is started
by an ``IncidentLauncher`` over the `failback` deployment, so this module stays free of
Prefect.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from drills.errors import DrillError
from drills.store.history import HistoryStore
from drills.store.kinds import Mode
from drills.store.serving import Site, recorded_serving
from drills.takeover.failback import not_serving_from_dr
from drills.takeover.incident import (
    LAUNCHING,
    Declaration,
    IncidentLauncher,
    audit_decision,
    blocking_runs,
    consent_problem,
    refusal_of,
    run_parameters,
)

FAILBACK_ACTION = "fail-back"
# Any run going on the plan is in the way of a failback, not only incidents.
ANY_MODE = (Mode.DRILL, Mode.INCIDENT, Mode.FAILBACK)


@dataclass(frozen=True)
class FailbackRequest:
    plan_path: str
    plan_name: str
    operator: str
    reason: str
    confirmation: str  # the plan's name, typed
    requested_at: dt.datetime
    # Further parameters of the flow (sync_deadline_s, say); the fields above win over them.
    extra_parameters: Mapping[str, Any] = field(default_factory=dict)


def failback_parameters(request: FailbackRequest) -> dict[str, Any]:
    """The parameters of the `failback` deployment."""
    return run_parameters(request, Mode.FAILBACK)


def request_failback(
    request: FailbackRequest, history: HistoryStore, launcher: IncidentLauncher
) -> Declaration:
    """Check the request, refuse it or start the failback run, and audit either way."""
    with LAUNCHING:
        decision, incident = _decide(request, history, launcher)
    detail: dict[str, Any] = {
        "requested_at": request.requested_at.isoformat(),
        "plan_path": request.plan_path,
        "incident_run": incident,
    }
    audit_decision(history, FAILBACK_ACTION, request.operator, request.plan_name, request.reason,
                   decision, detail)  # fmt: skip
    return decision


def _decide(
    request: FailbackRequest, history: HistoryStore, launcher: IncidentLauncher
) -> tuple[Declaration, str | None]:
    """The decision, and the incident it would close (None when there is none)."""
    problem = consent_problem(
        request.operator, request.reason, request.confirmation, request.plan_name
    )
    if request.requested_at.tzinfo is None:
        problem = "the request time has no time zone"
    if problem:
        return Declaration(False, f"refused: {problem}"), None
    try:
        blocking = blocking_runs(request, history, launcher, running_modes=ANY_MODE)
    except DrillError as exc:
        # Unknown is not "none running": refuse rather than start a second run.
        return Declaration(False, f"refused: cannot tell whether a run is going ({exc})"), None
    refusal = refusal_of(blocking, f"refused: a run on {request.plan_name} is in the way: ")
    if refusal is not None:
        return refusal, None
    recorded = recorded_serving(history, request.plan_name)
    if recorded.site != Site.DR or recorded.incident_id is None:
        refused = f"refused: {not_serving_from_dr(request.plan_name, recorded.site)}"
        return Declaration(False, refused), None
    key = f"{FAILBACK_ACTION}:{request.plan_name}:{request.requested_at.isoformat()}"
    try:
        flow_run_id = launcher.start(failback_parameters(request), idempotency_key=key)
    except DrillError as exc:
        return Declaration(False, f"not started: {exc}"), recorded.incident_id
    message = f"started failback run {flow_run_id} of incident {recorded.incident_id}"
    return Declaration(True, message, flow_run_id=flow_run_id), recorded.incident_id


__all__ = ["FAILBACK_ACTION", "FailbackRequest", "failback_parameters", "request_failback"]
