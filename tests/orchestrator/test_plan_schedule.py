"""The scheduled drill's Prefect schedule comes from the plan, and only from the plan."""

from __future__ import annotations

from pathlib import Path

import yaml

from drills.orchestrator.plan_schedule import (
    SCHEDULED_DRILL,
    deployment_schedules,
    plan_path,
)
from drills.orchestrator.rest import describe_schedule
from drills.plan import plan_from_text

ROOT = Path(__file__).resolve().parents[2]
VALID = ROOT / "tests" / "plan" / "plans" / "valid.yaml"


def _plan_text(schedule: str | None) -> str:
    text = VALID.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.startswith("schedule:")]
    if schedule is not None:
        lines.append(schedule)
    return "\n".join(lines) + "\n"


def test_the_deployment_gets_the_plans_cron_and_zone() -> None:
    plan = plan_from_text(_plan_text('schedule: {cron: "30 2 * * 1", timezone: Europe/Berlin}'))
    schedules = deployment_schedules(plan)
    assert schedules == [
        {"schedule": {"cron": "30 2 * * 1", "timezone": "Europe/Berlin"}, "active": True}
    ]
    # What the dashboard compares the deployment's schedules with.
    assert [describe_schedule(s) for s in schedules] == ["cron 30 2 * * 1 (Europe/Berlin)"]


def test_a_plan_without_a_schedule_leaves_the_deployment_unscheduled() -> None:
    plan = plan_from_text(_plan_text(None))
    assert plan.schedule is None
    assert deployment_schedules(plan) == []


def test_the_plan_parameter_is_read_from_the_project_dir() -> None:
    project = Path("/srv/drills")
    assert plan_path({"plan": ".lab/plan.yaml"}, project) == project / ".lab/plan.yaml"
    assert plan_path({"plan": "/etc/drills/a.yaml"}, project) == Path("/etc/drills/a.yaml")


def test_prefect_yaml_carries_no_second_schedule_for_the_drill() -> None:
    config = yaml.safe_load((ROOT / "prefect.yaml").read_text(encoding="utf-8"))
    [drill] = [d for d in config["deployments"] if d["name"] == SCHEDULED_DRILL.split("/")[1]]
    assert drill["entrypoint"] == "flows.drill:minimum_takeover_drill"
    assert drill["parameters"]["mode"] == "drill"
    assert "schedules" not in drill and "schedule" not in drill
