"""The `minimum-takeover-drill` flow: the takeover drill (or a real incident) under Prefect.

Thin by design: the phases, journal, rollback and measurements live in
drills/takeover/. This file only maps each phase onto a Prefect task, the
approval gate onto a pause that waits for typed input, and the stored run onto
a Markdown report and a table of phases.
"""

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any, Literal

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput
from prefect.runtime import flow_run as current_flow_run
from prefect.states import Cancelled, Completed, State

from drills.errors import DrillError
from drills.evidence import signed_history
from drills.launch import drill_request, takeover
from drills.plan import load_plan
from drills.plan import only_applications as application_view
from drills.store import HistoryStore, Mode, RunStatus, render_markdown, report_data
from drills.takeover import (
    LEASE_S,
    Approval,
    DrillAborted,
    DrillHooks,
    DrillRequest,
    DrillResult,
    Listener,
    PhaseRecord,
    StepRecord,
    approval_question,
    cancel_on_signals,
    every,
    parse_moment,
)
from drills.timefmt import duration
from flows.artifacts import artifact_key
from flows.events import notices_as_events

# A declared_at this far ahead of our clock is a typo or a wrong zone, not clock skew.
FUTURE_TOLERANCE = dt.timedelta(minutes=5)


class ApprovalInput(RunInput):
    """The form the Prefect UI shows on a paused drill: who approves, and why."""

    approved: bool
    approver: str
    comment: str = ""


def parse_declared_at(value: str | None) -> dt.datetime | None:
    """An incident's T0 as an aware datetime; a time without a zone is taken as UTC."""
    if not value:
        return None
    declared = dt.datetime.fromisoformat(value)
    if declared.tzinfo is None:
        declared = declared.replace(tzinfo=dt.UTC)
    if declared - dt.datetime.now(dt.UTC) > FUTURE_TOLERANCE:
        raise ValueError(f"declared_at {value} is in the future: T0 is when it was declared")
    return declared


def run_phase_as_task(name: str, body: Callable[[], Any]) -> Any:
    """Each phase shows as its own task run; a failed phase fails its task, then rolls back."""
    return task(name=name, task_run_name=name, cache_policy=NO_CACHE, retries=0)(body)()


def _poll_interval(timeout: int) -> int:
    # Prefect checks for a resume every poll_interval seconds. Its default of 10 s would
    # overrun a short approval window several times, and keep an approver waiting.
    return max(1, min(2, timeout // 10))


def approval_form_text(request: DrillRequest) -> str:
    """The pause form's text: the question and what approving does (as the terminal asks)."""
    question, effect = approval_question(request)
    return (
        f"**{question}** {effect}\n\nOperator: {request.operator}. Reason: {request.reason or '—'}."
    )


def wait_for_approval(request: DrillRequest) -> Approval:
    """Pause the flow run until a person answers the form, or abort after the plan's timeout."""
    timeout = max(1, int(request.plan.approval.timeout))
    form = ApprovalInput.with_initial_data(description=approval_form_text(request))
    try:
        answer = pause_flow_run(
            wait_for_input=form, timeout=timeout, poll_interval=_poll_interval(timeout)
        )
    except FlowPauseTimeout:
        raise DrillAborted(
            f"approval timed out after {duration(timeout)}: nobody answered"
        ) from None
    return Approval(answer.approved, answer.approver, answer.comment)


def _phase_logger(logger: logging.LoggerAdapter[Any] | logging.Logger) -> Listener:
    """Phase ends in the flow run's log, so the Prefect UI reads like the timeline; and a
    step's waits on a target that does not answer, every few seconds while they last."""
    due = every()

    def on_event(event: str, phase: PhaseRecord, step: StepRecord | None) -> None:
        if event == "phase-end":
            logger.info("phase %s: %s in %.2fs", phase.name, phase.status, phase.seconds)
        elif event == "step-end" and step is not None and step.status == "failed":
            logger.warning("step %s failed: %s", step.name, step.result)
        elif event == "step-wait" and step is not None and due(step):
            logger.warning("step %s waits: %s", step.name, step.waiting)

    return on_event


def publish(history: HistoryStore, result: DrillResult, plan_name: str) -> None:
    """The stored run as a Markdown report and a table of phases, both keyed per plan."""
    stored = history.get_run(result.run_id)
    if stored is None:
        raise DrillError(f"run {result.run_id} is missing from the history store")
    data = report_data(stored, history)
    summary = f"{data['run']['status']}, verdict {data['run']['verdict'] or '—'}"
    create_markdown_artifact(
        render_markdown(data),
        key=artifact_key("drill-report", plan_name),
        description=f"Drill report of {plan_name} (run {result.run_id}): {summary}",
    )
    create_table_artifact(
        [
            {"phase": p["name"], "status": p["status"], "seconds": round(p["seconds"], 2)}
            for p in data["phases"] or []
        ],
        key=artifact_key("drill-phases", plan_name),
        description=f"Phases of run {result.run_id} of {plan_name}: {summary}",
    )


def summarize(
    result: DrillResult, plan_name: str, flow_run_id: str | None, application: str | None = None
) -> dict[str, Any]:
    m = result.measurement
    return {
        "run_id": result.run_id,
        "flow_run_id": flow_run_id,
        "plan": plan_name,
        "application": application,
        "status": result.status,
        "verdict": result.verdict,
        "rto_seconds": m.rto_seconds if m else None,
        "client_rto_seconds": m.client_rto_seconds if m else None,
        "full_capacity_seconds": m.full_capacity_seconds if m else None,
        "preemption_seconds": m.preemption_seconds if m else None,
        "rpo_seconds": m.rpo_seconds if m else {},
        "error": result.error,
    }


@flow(name="minimum-takeover-drill", log_prints=False)
def minimum_takeover_drill(
    plan: str,
    mode: Literal["drill", "practice", "incident", "failback"] = "drill",
    dry_run: bool = False,
    operator: str = "prefect",
    reason: str = "",
    declared_at: str | None = None,
    detected_at: str | None = None,
    proposal: str | None = None,
    force_unfenced: bool = False,
    tier_deadline_s: float = 600,
    sync_deadline_s: float = 300,
    lease_s: float = LEASE_S,
    scheduled: bool = False,
    only: str | None = None,
) -> dict[str, Any] | State[Any]:
    """Fence the primary, bring DR's critical tier up, switch DNS, smoke-test, then the
    normal tier; time RTO, full capacity and RPO, and (drill mode) fail back and verify.
    In practice mode, DR's critical tier comes up beside the primary (never fenced, the
    production record never changed), is verified through practice.record or at DR's
    endpoint, and returns to standby. In incident mode, `declared_at` (ISO 8601) is T0,
    `detected_at` (ISO 8601) when the trouble was detected (an alert's startsAt: the
    `proposal` approved on the dashboard), recorded as detection -> declaration.
    In failback mode, bring production
    home from DR after an incident (refused unless the plan serves from DR;
    `sync_deadline_s` bounds the final sync). `lease_s`: how long the plan's lease
    outlives this run's last renewal if its worker dies (the recover-orphans deployment
    acts after it). `scheduled`: a drill or practice a gate holds back (a blocked window,
    a blocking alert, an Alertmanager that does not answer) is recorded as skipped and the
    flow run completes; without it, such a run is refused and fails. `only`: one
    application of the plan (drill, practice or incident), as `drills run --only`: only its
    targets are changed and leased."""
    logger = get_run_logger()
    if only and Mode(mode) == Mode.FAILBACK:
        raise DrillError("only does not apply to a failback: it follows its incident's "
                         "application on its own")  # fmt: skip
    drill_plan = application_view(load_plan(plan), only or None)
    flow_run_id = current_flow_run.id
    request = drill_request(
        drill_plan,
        plan,
        mode=mode,
        dry_run=dry_run,
        operator=operator,
        reason=reason,
        declared_at=parse_declared_at(declared_at),
        detected_at=parse_moment(detected_at, "detected_at") if detected_at else None,
        proposal=proposal,
        force_unfenced=force_unfenced,
        tier_deadline_s=tier_deadline_s,
        sync_deadline_s=sync_deadline_s,
        lease_s=lease_s,
        scheduled=scheduled,
        flow_run_id=flow_run_id,
    )
    hooks = DrillHooks(
        approve=wait_for_approval,
        run_phase=run_phase_as_task,
        listener=_phase_logger(logger),
    )
    history = signed_history()
    # Cancelling the flow run stops its process with SIGTERM: a drill then rolls back and
    # an incident stops and reports, both recorded, instead of dying part-way.
    with cancel_on_signals(), notices_as_events():
        result = takeover(request, history, hooks).run()
    publish(history, result, drill_plan.lease_name)
    summary = summarize(result, drill_plan.name, flow_run_id, drill_plan.application)
    logger.info("run %s of %s: %s", result.run_id, drill_plan.name, summary["status"])
    if result.status == RunStatus.SKIPPED:  # held back by a gate: recorded, not a failure
        return Completed(message=f"run {result.run_id} skipped: {result.error}")
    if result.status == RunStatus.CANCELLED:
        # Cancelled, not Failed: the run stopped cleanly where it was asked to. The
        # worker would mark it Cancelled anyway, but only after reading a traceback.
        return Cancelled(message=f"run {result.run_id}: {result.error or 'cancelled'}")
    if not result.status.succeeded:
        # Only now, with the history written, the rollback done and the report
        # published: Prefect must show the run as failed.
        raise DrillError(f"run {result.run_id} ended {result.status}: {result.error or '—'}")
    return summary
