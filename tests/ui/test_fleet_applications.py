"""The Fleet page shows each application's own last drill (`drills run --only`), apart from
its plan's, which counts every drill of the plan."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
import yaml

from drills.store.details import RunDetails
from drills.store.models import DrillRun
from tests.support.drill import offline_lab_plan_data
from tests.support.ui import UiEnv, open_page, shown


@pytest.fixture()
def ui_env(ui_env: UiEnv, db_url: str) -> UiEnv:
    """The page over each store: SQLite and PostgreSQL (the db_url fixture)."""
    ui_env.set("DRILLS_DB_URL", db_url)
    return dataclasses.replace(ui_env, db_url=db_url)


def _drill(run_id: str, days_ago: float, application: str | None, **fields: object) -> DrillRun:
    started = dt.datetime.now(dt.UTC) - dt.timedelta(days=days_ago)
    values: dict[str, object] = dict(
        id=run_id, plan="lab", plan_digest="x", mode="drill", operator="t", status="succeeded",
        verdict="met", started_at=started, finished_at=started + dt.timedelta(minutes=5),
        rto_seconds=40.0, details=RunDetails(application=application),
    )  # fmt: skip
    values.update(fields)
    return DrillRun(**values)


def test_each_application_shows_its_own_last_drill(ui_env: UiEnv) -> None:
    data = offline_lab_plan_data()
    data["applications"] = [
        {"name": "training", "workloads": ["training/trainer"]},
        {"name": "platform", "workloads": ["platform/model-registry"]},
    ]
    (ui_env.tmp_path / "lab.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    ui_env.set("DRILLS_PLANS", str(ui_env.tmp_path / "lab.yaml"))
    store = ui_env.store()
    store.create_run(_drill("train-old", 20, "training", verdict="missed", rto_seconds=900.0))
    store.create_run(_drill("train-new", 6, "training", rto_seconds=45.0))
    store.create_run(_drill("whole-plan", 1, None))  # the plan's, not the training's
    store.create_run(_drill("train-dry", 0.5, "training", dry_run=True, status="dry-run"))

    at = open_page()
    assert "Applications" in shown(at)
    [plans, applications] = [d.value for d in at.dataframe]
    assert list(plans["plan"]) == ["lab"] and plans["last drill"][0] == "24 h ago"
    rows = applications.set_index("application")
    assert list(rows.index) == ["training", "platform"]
    assert rows.loc["training", "run"] == "train-new"
    assert rows.loc["training", "verdict"] == "met"
    assert rows.loc["training", "last drill"] == "6 days ago"
    assert rows.loc["training", "RTO vs target"].startswith("45 s")
    assert rows.loc["platform", "last drill"] == "never"
    assert rows.loc["platform", "run"] == "—"
