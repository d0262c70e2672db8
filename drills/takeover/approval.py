"""A run's approval and its operator's confirmation: what they are asked, and how
their answer is kept.

One wording for the terminal prompt and the Prefect pause form, by the run's mode.
"""

from __future__ import annotations

from dataclasses import asdict

from drills.store.details import RunDetails
from drills.store.kinds import Mode
from drills.takeover.request import DrillAborted, DrillHooks, DrillRequest
from drills.takeover.steps.executor import PlannedChange
from drills.takeover.timeline import Timeline


def approval_question(request: DrillRequest) -> tuple[str, str]:
    """What an approver is asked, and what approving does: one wording for the terminal
    prompt and the Prefect pause form, by the run's mode."""
    name = request.plan.name
    if request.plan.application:
        name += f" (application {request.plan.application})"
    if request.mode == Mode.FAILBACK:
        return (
            f"Approve the failback of {name}?",
            "Approving stops the DR writers, waits until their writes are at the primary, "
            "brings the primary up, switches DNS back to it and returns DR to standby.",
        )
    if request.mode == Mode.PRACTICE:
        return (
            f"Approve the practice of {name}?",
            "Approving brings DR's critical tier up beside the primary, which is not fenced "
            "and keeps its DNS record, verifies DR, then returns it to standby.",
        )
    effect = "Approving fences the primary site and brings DR up"
    if request.mode == Mode.DRILL:
        return f"Approve the drill of {name}?", f"{effect}, then fails back after measuring."
    return f"Approve the incident takeover of {name}?", f"{effect}; DR stays serving."


def approve(
    request: DrillRequest, hooks: DrillHooks, timeline: Timeline, details: RunDetails
) -> None:
    """Wait for the approval the plan requires; a refusal, or nobody to ask, aborts the
    run before any change. The answer is kept in the run's details."""
    if not request.plan.approval.required:
        return
    with timeline.phase("approve"), timeline.step("wait for approval") as step:
        if hooks.approve is None:
            raise DrillAborted("the plan requires approval and nobody can give it here")
        answer = hooks.approve(request)
        details.approval = answer
        step.evidence = asdict(answer)
        if not answer.approved:
            raise DrillAborted(f"not approved by {answer.approver}: {answer.comment}")


def confirm(hooks: DrillHooks, planned: list[PlannedChange]) -> None:
    """The operator's yes to the changes listed, where the caller asks one (the CLI's
    prompt); no aborts the run before any change."""
    if hooks.confirm is not None and not hooks.confirm(planned):
        raise DrillAborted("the operator did not confirm the changes")


__all__ = ["approval_question", "approve", "confirm"]
