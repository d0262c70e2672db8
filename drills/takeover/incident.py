"""Declaring an incident: the checks before a real failover starts, and its audit trail.

The dashboard's button and `drills serve run declare-incident` both come here, so a
declaration is checked, refused and audited the same way wherever it is made. Every
declaration, accepted or refused, is written to the audit log with who, when, what and
why. Starting the run itself is left to an ``IncidentLauncher`` (both give one over the
Prefect REST API, drills.orchestrator.flow_runs), so this module stays free of Prefect
and can be tested against any launcher.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from drills.errors import DrillError
from drills.notify.runs import announce_incident
from drills.store.history import HistoryStore
from drills.store.kinds import Mode
from drills.store.models import DrillRun
from drills.store.serving import serving_from_dr_refusal

log = logging.getLogger("drills.takeover.incident")

DECLARE_ACTION = "declare-incident"

# One dashboard process serves many sessions: two people clicking at once must not
# both pass the "nothing running" check before either run exists. A failback request
# (drills.takeover.failback_request) takes the same lock: either starts a run on the plan.
LAUNCHING = threading.Lock()


@dataclass(frozen=True)
class ActiveRun:
    """A run that is still going somewhere: in the history store, or on the scheduler."""

    id: str
    source: str  # "history" or "prefect"
    state: str


class IncidentLauncher(Protocol):
    """Starts the incident run and knows which ones are still going."""

    def active_runs(self, plan_path: str, plan_name: str) -> list[ActiveRun]:
        """Incident runs of this plan in a non-final state on the scheduler."""
        ...

    def is_finished(self, flow_run_id: str) -> bool | None:
        """Whether that run reached a final state; None when it cannot be told."""
        ...

    def start(self, parameters: dict[str, Any], *, idempotency_key: str) -> str:
        """Start the incident run and return its id at once (it does not wait)."""
        ...


@dataclass(frozen=True)
class IncidentRequest:
    plan_path: str
    plan_name: str
    operator: str
    reason: str
    confirmation: str
    declared_at: dt.datetime  # T0: the moment the person declared it
    force_unfenced: bool = False
    # Further parameters of the flow (tier_deadline_s, say); the fields above win over them.
    extra_parameters: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Declaration:
    accepted: bool
    message: str
    flow_run_id: str | None = None
    blocking: tuple[ActiveRun, ...] = field(default_factory=tuple)


class PersonRequest(Protocol):
    """What run_parameters needs of a person's request: the plan, who, why, and further
    parameters of the flow."""

    @property
    def plan_path(self) -> str: ...

    @property
    def operator(self) -> str: ...

    @property
    def reason(self) -> str: ...

    @property
    def extra_parameters(self) -> Mapping[str, Any]: ...


def run_parameters(request: PersonRequest, mode: Mode, **fields: Any) -> dict[str, Any]:
    """The drill flow's parameters of a run a person asked for: the request's further
    parameters, overridden by its plan, mode, who and why, and then by ``fields``."""
    return {
        **request.extra_parameters,
        "plan": request.plan_path,
        "mode": mode,
        "operator": request.operator,
        "reason": request.reason,
        **fields,
    }


def incident_parameters(request: IncidentRequest) -> dict[str, Any]:
    """The parameters of the `declare-incident` deployment."""
    return run_parameters(
        request, Mode.INCIDENT, declared_at=request.declared_at.isoformat(),
        force_unfenced=request.force_unfenced,
    )  # fmt: skip


def consent_problem(operator: str, reason: str, confirmation: str, plan_name: str) -> str | None:
    """Why a person's request to start a real run is not yet complete; None when it is."""
    if not operator.strip():
        return "nobody is named as the operator"
    if not reason.strip():
        return "a reason is required"
    if confirmation.strip() != plan_name:
        return f"the confirmation does not match the plan name {plan_name!r}"
    return None


def _problem(request: IncidentRequest) -> str | None:
    if request.declared_at.tzinfo is None:
        return "the declaration time has no time zone"
    r = request
    return consent_problem(r.operator, r.reason, r.confirmation, r.plan_name)


def _still_running(run: DrillRun, launcher: IncidentLauncher) -> bool:
    # A run that crashed or stopped part-way never gets finished_at; the scheduler
    # knows whether its process is still going.
    if run.flow_run_id:
        return launcher.is_finished(run.flow_run_id) is not True
    return True


def decision_needed(run: DrillRun) -> str:
    """The refusal while ``run`` ended part-way and waits for an operator's decision."""
    if run.mode == Mode.INCIDENT:
        what = (
            f"`drills recover {run.id} --complete` finishes that takeover, "
            f"`drills recover {run.id} --hold` keeps DR as it is"
        )
    elif run.mode == Mode.FAILBACK:
        what = (
            f"`drills recover {run.id}` undoes that failback before its DNS switch, "
            "or completes it after"
        )
    else:
        what = f"`drills recover {run.id}` rolls that drill back"
    return (
        f"refused: {run.mode} run {run.id} on {run.plan} ended part-way ({run.status}) and "
        f"waits for an operator: {what}. Then try again."
    )


class PlanRequest(Protocol):
    """What blocking_runs needs of a request: the plan, by file and by name."""

    @property
    def plan_path(self) -> str: ...

    @property
    def plan_name(self) -> str: ...


@dataclass(frozen=True)
class Blocking:
    running: list[ActiveRun]  # incidents of the plan still going, in the history or the scheduler
    # Runs that ended without finishing (crashed, or an incident stopped part-way): a new
    # run would refuse to start on top of them, so declaring must too.
    stopped: list[DrillRun]


def blocking_runs(
    request: PlanRequest,
    history: HistoryStore,
    launcher: IncidentLauncher,
    *,
    running_modes: Collection[str] = (Mode.INCIDENT,),
) -> Blocking:
    """What keeps a new run of the launcher's kind on the plan from starting: its runs on the
    scheduler, the runs of ``running_modes`` still going, and the runs that stopped part-way.
    Each run's state is read once."""
    unfinished = history.unfinished_runs(request.plan_name)
    going = {run.id: _still_running(run, launcher) for run in unfinished}
    running = [
        ActiveRun(run.id, "history", run.status)
        for run in unfinished
        if run.mode in running_modes and going[run.id]
    ]
    known = {run.flow_run_id for run in unfinished if run.flow_run_id}
    running += [
        r for r in launcher.active_runs(request.plan_path, request.plan_name) if r.id not in known
    ]
    stopped = [run for run in unfinished if not run.dry_run and not going[run.id]]
    return Blocking(running, stopped)


def describe(runs: Sequence[ActiveRun]) -> str:
    return ", ".join(f"{r.id} ({r.state})" for r in runs)


def audit_decision(
    history: HistoryStore,
    action: str,
    who: str,
    plan: str,
    reason: str,
    decision: Declaration,
    detail: dict[str, Any],
) -> None:
    """Audit (and log) a request to start a run, accepted or refused: ``detail`` with the
    outcome, the run started and the runs in the way."""
    detail = {**detail, "outcome": decision.message}
    if decision.flow_run_id:
        detail["flow_run_id"] = decision.flow_run_id
    if decision.blocking:
        detail["blocking"] = [r.id for r in decision.blocking]
    history.audit(
        who=who or "(nobody)", action=action, plan=plan, accepted=decision.accepted,
        reason=reason, detail=detail,
    )  # fmt: skip
    level = logging.WARNING if decision.accepted else logging.INFO
    log.log(level, "%s on %s by %s: %s", action, plan, who, decision.message)


def declare_incident(
    request: IncidentRequest, history: HistoryStore, launcher: IncidentLauncher
) -> Declaration:
    """Check the declaration, refuse or start the incident run, and audit either way."""
    with LAUNCHING:
        declaration = _decide(request, history, launcher)
    detail: dict[str, Any] = {
        "declared_at": request.declared_at.isoformat(),
        "force_unfenced": request.force_unfenced,
        "plan_path": request.plan_path,
    }
    audit_decision(history, DECLARE_ACTION, request.operator, request.plan_name, request.reason,
                   declaration, detail)  # fmt: skip
    if declaration.accepted:
        announce_incident(
            request.plan_name, request.plan_path, request.operator, request.reason,
            request.declared_at, declaration.flow_run_id,
        )  # fmt: skip
    return declaration


def refusal_of(blocking: Blocking, running: str) -> Declaration | None:
    """The refusal while runs are in the way: ``running`` then the runs still going, else
    the decision a run stopped part-way waits for; None when nothing is in the way."""
    if blocking.running:
        return Declaration(
            False, f"{running}{describe(blocking.running)}", blocking=tuple(blocking.running)
        )
    if blocking.stopped:
        return Declaration(
            False,
            decision_needed(blocking.stopped[0]),
            blocking=tuple(ActiveRun(r.id, "history", r.status) for r in blocking.stopped),
        )
    return None


def _decide(
    request: IncidentRequest, history: HistoryStore, launcher: IncidentLauncher
) -> Declaration:
    problem = _problem(request) or serving_from_dr_refusal(history, request.plan_name)
    if problem:
        return Declaration(False, f"refused: {problem}")
    try:
        blocking = blocking_runs(request, history, launcher)
    except DrillError as exc:
        # Unknown is not "none running": refuse rather than risk a second takeover.
        return Declaration(False, f"refused: cannot tell whether an incident is running ({exc})")
    refusal = refusal_of(
        blocking, f"refused: an incident on {request.plan_name} is already running: "
    )
    if refusal is not None:
        return refusal
    key = f"{DECLARE_ACTION}:{request.plan_name}:{request.declared_at.isoformat()}"
    try:
        flow_run_id = launcher.start(incident_parameters(request), idempotency_key=key)
    except DrillError as exc:
        return Declaration(False, f"not started: {exc}")
    return Declaration(True, f"started incident run {flow_run_id}", flow_run_id=flow_run_id)
