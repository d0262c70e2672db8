"""Readiness and Plans with the Prefect test server: a re-run becomes a real flow run of
the readiness deployment, and the next drill comes from the drill deployment."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from drills.readiness import select_checks
from tests.ui.conftest import Drilled, UiEnv
from tests.ui.support import FLOW_NAME, button, delete_flow_runs, flow_runs, open_page, shown

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
        name=DRILL_DEPLOYMENT.split("/")[1],
        cron="0 3 1 1,4,7,10 *",
        parameters={"plan": drilled.plan_path},
    )
    drill.apply()
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
    at = open_page()
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
    assert "Next scheduled drill:** **2031-04-01 03:00:00 UTC**" in text
    assert "cron 0 3 1 1,4,7,10 * (UTC)" in text
