"""What the dashboard tests share: opening a page in AppTest, reading what it shows,
adding runs to a store, and asking the Prefect test server about runs."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from drills.store.history import HistoryStore
from drills.store.models import DrillRun
from tests.support.streamlit_scan import scan_components_once

scan_components_once()  # every AppTest of the process, whichever module makes it

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "ui" / "streamlit_app.py"
EXAMPLE_PLAN = ROOT / "plans" / "gpu-platform.example.yaml"
FLOW_NAME = "minimum-takeover-drill"
DECLARE_BUTTON = "Declare incident and start the failover"
TEXT_ELEMENTS = ("markdown", "caption", "info", "error", "warning", "success", "title", "header",
                 "subheader", "code")  # fmt: skip


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


def open_page(page: str | None = None, *, at: AppTest | None = None) -> AppTest:
    """Run the app, then switch to ``app_pages/<page>.py`` (the default page when None)."""
    if at is None:  # not `at or ...`: an AppTest that has not run yet is falsy
        at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    if page is not None:
        at.switch_page(f"app_pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def shown(at: AppTest) -> str:
    """Every piece of text the page shows, one per line."""
    parts: list[str] = []
    for kind in TEXT_ELEMENTS:
        parts += [str(e.value) for e in getattr(at, kind)]
    parts += [str(m.label) for m in at.metric] + [str(m.value) for m in at.metric]
    parts += [str(t.label) for t in at.tabs] + [str(x.label) for x in at.expander]
    return "\n".join(parts)


def button(at: AppTest, label: str) -> Any | None:
    return next((b for b in at.button if b.label == label), None)


def add_run(store: HistoryStore, **fields: Any) -> str:
    """Insert a finished run with sensible defaults; returns its id."""
    started = fields.pop("started_at", dt.datetime.now(dt.UTC) - dt.timedelta(days=1))
    rto = fields.pop("rto_seconds", None)
    target = fields.pop("rto_target", 300.0)
    finished = fields.pop("finished", True)
    run = DrillRun(
        id=fields.pop("id", uuid.uuid4().hex[:12]),
        plan=fields.pop("plan", "lab"),
        plan_digest="0" * 64,
        mode=fields.pop("mode", "drill"),
        dry_run=False,
        operator=fields.pop("operator", "bob"),
        reason=fields.pop("reason", "test"),
        status=fields.pop("status", "succeeded"),
        started_at=started,
        t0=started,
        restored_at=None,
        finished_at=started + dt.timedelta(seconds=(rto or 5.0) + 10) if finished else None,
        rto_seconds=rto,
        client_rto_seconds=(rto + 30) if rto is not None else None,
        rpo_seconds={"training-data": 12.0} if rto is not None else {},
        verdict=fields.pop("verdict", "met"),
        timeline=[],
        readiness={},
        details={"measurement": {"rto_target_seconds": target, "rpo_target_seconds": 900.0}}
        if rto is not None
        else {},
        flow_run_id=fields.pop("flow_run_id", None),
        error=fields.pop("error", None),
    )
    assert not fields, f"unknown fields {sorted(fields)}"
    store.create_run(run)
    return run.id


def flow_runs(api_url: str, deployment: str) -> list[Any]:
    """Every flow run of ``deployment`` on the server at ``api_url``."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: api_url}), get_client(sync_client=True) as client:
        found = client.read_deployment_by_name(deployment)
        return client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[found.id]))
        )


def delete_flow_runs(api_url: str, deployment: str) -> None:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    runs = flow_runs(api_url, deployment)
    with temporary_settings({PREFECT_API_URL: api_url}), get_client(sync_client=True) as client:
        for run in runs:
            client.delete_flow_run(run.id)


def fill_declaration(
    at: AppTest, *, reason: str, confirmation: str, operator: str | None = None,
    force: bool = False,
) -> AppTest:  # fmt: skip
    """Fill the declare page's form (the name only where no sign-in gives it)."""
    if operator is not None:
        at.text_input(key="declare.operator").input(operator)
    at.text_area(key="declare.reason").input(reason)
    at.text_input(key="declare.confirm").input(confirmation)
    if force:
        at.checkbox(key="declare.force").check()
    return at


def declare(at: AppTest) -> AppTest:
    """Press the declare button, which must be there."""
    found = button(at, DECLARE_BUTTON)
    assert found is not None, shown(at)
    return found.click().run()


@dataclass(frozen=True)
class Drilled:
    db_file: Path
    plan_path: str
    run_id: str
