"""Fixtures of the dashboard tests: a clean UI environment per test, a history store
holding a real drill on the lab, and deployments of the real flow on the Prefect
test server."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import streamlit as st

from drills.drill import Drill, DrillRequest
from drills.history import HistoryStore
from drills.lab.runtime import LabInfo
from drills.plan import load_plan
from tests.ui.support import EXAMPLE_PLAN, FLOW_NAME


@dataclass
class UiEnv:
    """The environment one AppTest sees; tests change it through ``set``."""

    monkeypatch: pytest.MonkeyPatch
    tmp_path: Path
    db_url: str

    def set(self, name: str, value: str) -> None:
        self.monkeypatch.setenv(name, value)

    def store(self) -> HistoryStore:
        return HistoryStore(self.db_url)


@pytest.fixture()
def ui_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[UiEnv]:
    """No Prefect, no access configured, the example plan, an empty store of its own."""
    for name in list(os.environ):
        ours = name.startswith(("DRILLS_UI_", "DRILLS_PLANS")) or name == "PREFECT_UI_URL"
        if ours or (name.startswith("DRILLS_") and name.endswith("_DEPLOYMENT")):
            monkeypatch.delenv(name)
    db_url = f"sqlite:///{tmp_path / 'ui.db'}"
    monkeypatch.setenv("DRILLS_DB_URL", db_url)
    monkeypatch.setenv("PREFECT_API_URL", "")
    monkeypatch.setenv("DRILLS_PLANS", str(EXAMPLE_PLAN))
    # Loaders are cached per process; each test starts from what it set up.
    st.cache_data.clear()
    yield UiEnv(monkeypatch, tmp_path, db_url)
    st.cache_data.clear()


@dataclass(frozen=True)
class Drilled:
    db_file: Path
    plan_path: str
    run_id: str


@pytest.fixture(scope="session")
def drilled(lab: LabInfo, tmp_path_factory: pytest.TempPathFactory) -> Drilled:
    """A history store holding one real drill on the shared lab (it fails back)."""
    db_file = tmp_path_factory.mktemp("ui-drilled") / "history.db"
    store = HistoryStore(f"sqlite:///{db_file}")
    plan_path = str(Path(lab.state_dir) / "plan.yaml")
    request = DrillRequest(
        load_plan(plan_path), operator="alice", reason="quarterly drill", tier_deadline_s=20
    )
    result = Drill(request, store).run()
    assert result.status == "succeeded", result.error
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
