"""Fixtures of the dashboard tests: a history store holding a real drill on the lab, and
deployments of the real flow on the Prefect test server. (``ui_env``, a clean UI
environment per test, is in the top conftest: test_serve.py opens pages too.)"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from drills.plan import load_plan
from drills.store.history import HistoryStore
from drills.takeover.drill import Drill, DrillRequest
from drills_lab.runtime import LabInfo
from tests.support.ui import FLOW_NAME, Drilled, UiEnv


@pytest.fixture(scope="session")
def drilled(lab: LabInfo, tmp_path_factory: pytest.TempPathFactory) -> Drilled:
    """A history store holding one real drill on the shared lab (it fails back)."""
    db_file = tmp_path_factory.mktemp("ui-drilled") / "history.db"
    store = HistoryStore(f"sqlite:///{db_file}")
    plan_path = str(Path(lab.state_dir) / "plan.yaml")
    request = DrillRequest(
        load_plan(plan_path), operator="alice", reason="quarterly drill", tier_deadline_s=20
    )
    drill = Drill(request, store)
    result = drill.run()
    why = [f"{r.id}: {r.summary}" for r in drill.readiness.blocking] if drill.readiness else []
    assert result.status == "succeeded", (result.error, why)
    store.close()  # checkpoints the WAL: the file alone now holds everything
    return Drilled(db_file, plan_path, result.run_id)


@pytest.fixture()
def populated(ui_env: UiEnv, drilled: Drilled) -> Drilled:
    """``ui_env`` on a copy of the drilled store, with the lab's plan configured."""
    copy = ui_env.tmp_path / "drilled.db"
    shutil.copyfile(drilled.db_file, copy)
    ui_env.db_url = f"sqlite:///{copy}"
    ui_env.set("DRILLS_DB_URL", ui_env.db_url)
    ui_env.set("DRILLS_PLANS", drilled.plan_path)
    return drilled


@pytest.fixture(scope="session")
def prefect_url(prefect_harness: None) -> str:
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    assert url, "the Prefect test harness did not set PREFECT_API_URL"
    return str(url).rstrip("/")


@pytest.fixture(scope="session")
def incident_deployment(prefect_url: str) -> str:
    """A deployment of the real takeover flow on the test server, nobody serving it.

    Named apart from prefect.yaml's so no other test's runs are mistaken for ours.
    """
    from flows.drill import minimum_takeover_drill

    name = "ui-apptest-declare-incident"
    deployment: Any = minimum_takeover_drill.to_deployment(name=name)  # sync here, not a coroutine
    deployment.apply()
    return f"{FLOW_NAME}/{name}"
