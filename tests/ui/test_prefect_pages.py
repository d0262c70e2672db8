"""Readiness, Plans and History with the Prefect test server: a re-run becomes a real flow
run of the readiness deployment, the next drill comes from the drill deployment, and a
running drill's Cancel goes to Prefect (cancelling a started run on a worker is in
test_serve.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from drills.checks.checkup import select_checks
from drills.orchestrator.plan_schedule import apply_plan_schedule
from drills.orchestrator.rest import PrefectRest
from tests.support.ui import (
    FLOW_NAME,
    Drilled,
    UiEnv,
    add_run,
    button,
    delete_flow_runs,
    flow_runs,
    open_page,
    shown,
)

READINESS_DEPLOYMENT = "readiness-check/ui-apptest-readiness"
DRILL_DEPLOYMENT = f"{FLOW_NAME}/ui-apptest-quarterly"


@pytest.fixture(scope="module")
def deployments(prefect_url: str, drilled: Drilled) -> dict[str, str]:
    """The readiness flow and the drill flow deployed on the test server, nobody serving them."""
    from flows.drill import minimum_takeover_drill
    from flows.readiness import readiness_check

    readiness: Any = readiness_check.to_deployment(name=READINESS_DEPLOYMENT.split("/")[1])
    readiness.apply()
    drill: Any = minimum_takeover_drill.to_deployment(
        name=DRILL_DEPLOYMENT.split("/")[1], parameters={"plan": drilled.plan_path}
    )
    drill.apply()
    # Scheduled as `drills serve` schedules it: from the plan's `schedule:`, nowhere else.
    with PrefectRest(prefect_url) as api:
        done = apply_plan_schedule(api, Path("."), DRILL_DEPLOYMENT)
    assert done.endswith("scheduled from plan lab: cron 0 3 1 1,4,7,10 * (UTC)"), done
    return {"readiness": READINESS_DEPLOYMENT, "drill": DRILL_DEPLOYMENT}


@pytest.fixture()
def prefect_env(
    populated: Drilled, ui_env: UiEnv, prefect_url: str, deployments: dict[str, str]
) -> Iterator[UiEnv]:
    ui_env.set("PREFECT_API_URL", prefect_url)
    ui_env.set("DRILLS_READINESS_DEPLOYMENT", deployments["readiness"])
    ui_env.set("DRILLS_DRILL_DEPLOYMENT", deployments["drill"])
    for name in deployments.values():
        delete_flow_runs(prefect_url, name)
    yield ui_env
    for name in deployments.values():
        delete_flow_runs(prefect_url, name)


def test_rerun_checks_starts_the_readiness_deployment(
    prefect_env: UiEnv, populated: Drilled, prefect_url: str
) -> None:
    prefect_env.set("DRILLS_UI_LAB", "1")
    at = open_page("readiness")
    button(at, "Re-run checks").click().run()  # type: ignore[union-attr]
    assert not at.exception
    [run] = flow_runs(prefect_url, READINESS_DEPLOYMENT)
    assert run.parameters == {"plan": populated.plan_path}
    assert "dashboard" in run.tags
    # Nobody serves it here: the page says it waits, and keeps the last snapshot meanwhile.
    text = shown(at)
    assert f"Readiness run {run.name} is scheduled, waiting for a worker" in text
    total = len(select_checks())
    assert f"0/{total} checks" in at.get("progress")[0].proto.text
    assert "Images" in text


def test_plans_page_shows_the_next_scheduled_drill(
    prefect_env: UiEnv, populated: Drilled, prefect_url: str
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.states import Scheduled

    when = dt.datetime(2031, 4, 1, 3, 0, tzinfo=dt.UTC)
    with temporary_settings({PREFECT_API_URL: prefect_url}), get_client(sync_client=True) as c:
        deployment = c.read_deployment_by_name(DRILL_DEPLOYMENT)
        c.create_flow_run_from_deployment(deployment.id, state=Scheduled(scheduled_time=when))
    at = open_page("plans")
    text = shown(at)
    assert (
        "Next scheduled drill:** **2031-04-01 03:00:00 UTC** "
        "(plan schedule `0 3 1 1,4,7,10 *` (UTC))" in text
    )
    assert "instead" not in text


def test_plans_page_calls_out_a_deployment_that_runs_another_schedule(
    prefect_env: UiEnv, populated: Drilled, prefect_url: str
) -> None:
    with PrefectRest(prefect_url) as api:
        deployment = api.deployment(DRILL_DEPLOYMENT)
        api.set_schedules(deployment.id, [{"schedule": {"cron": "0 4 * * *"}, "active": True}])
        try:
            at = open_page("plans")
        finally:
            apply_plan_schedule(api, Path("."), DRILL_DEPLOYMENT)
        assert api.deployment(DRILL_DEPLOYMENT).schedules == ("cron 0 3 1 1,4,7,10 * (UTC)",)
    text = shown(at)
    assert (
        f"plan schedule `0 3 1 1,4,7,10 *` (UTC) — **the `{DRILL_DEPLOYMENT}` deployment runs "
        "cron 0 4 * * * (UTC) instead**: run `drills serve` again" in text
    )


def _scheduled_drill(prefect_url: str) -> str:
    """A flow run of the drill deployment that no worker will pick up."""
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: prefect_url}):
        run: Any = run_deployment(DRILL_DEPLOYMENT, timeout=0, as_subflow=False)
    return str(run.id)


def _history_detail(run_id: str) -> Any:
    at = open_page("history")
    at.selectbox(key="history.run").set_value(run_id).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_cancelling_a_running_drill_needs_the_operator_role(
    prefect_env: UiEnv, prefect_url: str
) -> None:
    flow_run_id = _scheduled_drill(prefect_url)
    run_id = add_run(prefect_env.store(), status="running", finished=False, flow_run_id=flow_run_id)
    at = _history_detail(run_id)
    assert "Cancelling a run needs the operator role" in shown(at)
    assert not [b for b in at.button if b.key == f"history.{run_id}.cancel"]
    prefect_env.set("DRILLS_UI_LAB", "1")
    at = _history_detail(run_id)
    cancel = at.button(key=f"history.{run_id}.cancel")
    assert cancel.label == "Cancel the drill run" and cancel.disabled  # until confirmed
    assert "rolls back at once" in at.checkbox(key=f"history.{run_id}.cancel_sure").label


def test_a_run_whose_flow_run_ended_is_a_crash_to_recover(
    prefect_env: UiEnv, prefect_url: str
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.states import Crashed

    flow_run_id = _scheduled_drill(prefect_url)
    with temporary_settings({PREFECT_API_URL: prefect_url}), get_client(sync_client=True) as c:
        c.set_flow_run_state(flow_run_id, Crashed(message="process killed"), force=True)
    run_id = add_run(prefect_env.store(), status="running", finished=False, flow_run_id=flow_run_id)
    prefect_env.set("DRILLS_UI_LAB", "1")
    at = _history_detail(run_id)
    assert f"`drills recover {run_id}` puts things back" in shown(at)
    assert not [b for b in at.button if b.key == f"history.{run_id}.cancel"]


def test_a_run_started_from_a_terminal_is_cancelled_there(prefect_env: UiEnv) -> None:
    run_id = add_run(prefect_env.store(), status="running", finished=False)
    prefect_env.set("DRILLS_UI_LAB", "1")
    at = _history_detail(run_id)
    assert "Ctrl-C there cancels it" in shown(at)
    assert not [b for b in at.button if b.key == f"history.{run_id}.cancel"]
