"""The scheduled drill's Prefect schedule, taken from its plan.

The plan's ``schedule:`` is the one place a drill's cron is written: prefect.yaml
carries none for the scheduled drill, and ``drills serve`` gives the deployment the
schedule of the plan it runs (its ``plan`` parameter), replacing whatever it had.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from drills.errors import PlanError
from drills.orchestrator.rest import PrefectRest
from drills.plan import DrillPlan, load_plan
from drills.text import first_line

# The deployment of prefect.yaml that runs the plan's drill on its schedule.
SCHEDULED_DRILL = "minimum-takeover-drill/quarterly-drill"


def deployment_schedules(plan: DrillPlan) -> list[dict[str, Any]]:
    """The deployment's schedules as Prefect takes them: the plan's cron in its zone,
    or none for a plan without a schedule (it is drilled only when someone asks)."""
    if plan.schedule is None:
        return []
    return [
        {
            "schedule": {"cron": plan.schedule.cron, "timezone": plan.schedule.timezone},
            "active": True,
        }
    ]


def plan_path(parameters: dict[str, Any], project_dir: Path) -> Path:
    """The plan a deployment runs: its ``plan`` parameter, relative to the project dir
    as the flow itself reads it."""
    path = Path(str(parameters.get("plan") or "")).expanduser()
    return path if path.is_absolute() else project_dir / path


def apply_plan_schedule(
    api: PrefectRest, project_dir: Path, deployment_name: str = SCHEDULED_DRILL
) -> str:
    """Give the scheduled drill deployment its plan's schedule; returns what was done,
    in a line for the person starting the server. A plan that cannot be read leaves the
    deployment unscheduled: a drill of an unreadable plan would fail anyway."""
    deployment = api.find_deployment(deployment_name)
    if deployment is None:  # a prefect.yaml of one's own may not have it
        return f"no {deployment_name} deployment to schedule"
    path = plan_path(deployment.parameters, project_dir)
    try:
        plan = load_plan(path)
    except PlanError as exc:
        api.set_schedules(deployment.id, [])
        return f"{deployment_name} not scheduled: {first_line(exc)}"
    api.set_schedules(deployment.id, deployment_schedules(plan))
    if plan.schedule is None:
        return f"{deployment_name} not scheduled: plan {plan.name} has no schedule"
    return (
        f"{deployment_name} scheduled from plan {plan.name}: "
        f"cron {plan.schedule.cron} ({plan.schedule.timezone})"
    )


__all__ = ["SCHEDULED_DRILL", "apply_plan_schedule", "deployment_schedules", "plan_path"]
