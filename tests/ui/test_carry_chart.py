"""The demand DR carried over a run, on the History page: the carry's summary, and a chart of
each measured service's percentage on the run's clock with its target drawn."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from typer.testing import CliRunner

from drills.cli import app
from tests.support.ui import UiEnv, add_run, open_page, shown
from ui.carry_chart import carry_chart, carry_frames

T0 = dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC)


def _capacity() -> dict[str, Any]:
    at = T0.timestamp()
    return {
        "summary": "target not carried: serving/llm-server carries 71.5% of 100% (2/3 replicas)",
        "carried": False,
        "services": [{
            "service": "serving/llm-server", "target_percent": 100.0, "carried": False,
            "needed": 3, "scaled_to": 2, "reached": 2, "percent_carried": 71.5,
            "over_time": [[at + 0.5, 0, 0.0], [at + 1.2, 1, 35.7], [at + 1.9, 2, 71.5],
                          [at + 3.0, 2, 71.5]],
        }],
    }  # fmt: skip


def test_the_carry_chart_steps_on_the_runs_clock_below_its_target() -> None:
    points, targets = carry_frames(_capacity(), T0)
    assert list(points["seconds"]) == pytest.approx([0.5, 1.2, 1.9, 3.0], abs=1e-3)
    assert list(points["percent"]) == [0.0, 35.7, 71.5, 71.5]
    assert list(targets["target"]) == [100.0]
    spec = carry_chart(_capacity(), T0).to_dict(validate=True)
    assert [layer["mark"]["type"] for layer in spec["layer"]] == ["line", "rule"]
    assert spec["layer"][0]["mark"]["interpolate"] == "step-after"


def test_a_run_not_met_after_the_carry_shows_what_dr_carried(ui_env: UiEnv) -> None:
    """It kept no measurement (it stopped after the carry), but kept what DR carried."""
    store = ui_env.store()
    run = add_run(store, started_at=T0, status="rolled-back", verdict="not met")
    store.update_run(run, details={"capacity": _capacity()})
    report = CliRunner().invoke(app, ["report", run, "--format", "json", "--db", ui_env.db_url])
    assert report.exit_code == 0, report.output
    assert json.loads(report.stdout)["capacity"] == _capacity()  # the CLI's report has it too
    at = open_page("history")
    at.query_params["run"] = run
    at.run()
    assert not at.exception, at.exception
    text = shown(at)
    assert "Demand carried at DR" in text and "71.5% of 100%" in text
    assert at.get("vega_lite_chart"), "no chart of the demand carried"
