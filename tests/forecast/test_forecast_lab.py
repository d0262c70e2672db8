"""The forecast on the lab, through `drills run` and `drills forecast` as an operator runs
them: it follows the DR rollout speed (`--ready-delay`) between drills, and after two drills
its interval holds the next drill's measured RTO."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from drills_lab.runtime import LabInfo
from tests.support.drill import drills_cli
from tests.support.services import own_lab


def _drill(info: LabInfo, db: str) -> dict[str, Any]:
    plan = str(Path(info.state_dir) / "plan.yaml")
    result = drills_cli("run", plan, "--yes", "--json", db=db)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return json.loads(result.stdout)


def _forecast(info: LabInfo, db: str) -> dict[str, Any]:
    result = drills_cli("forecast", str(Path(info.state_dir) / "plan.yaml"), "--json", db=db)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_forecast_follows_the_dr_rollout_and_holds_the_next_drill(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'history.db'}"
    with own_lab(tmp_path_factory, "forecast-fast", ready_delay=0.2) as fast:
        before = _forecast(fast, db)
        assert before["drills"] == 0 and "stated model" in before["basis"]
        first = _drill(fast, db)["forecast"]  # made by the stated model, and holding it
        assert first["drills"] == 0 and first["inside_interval"] is True, first
        _drill(fast, db)
        after_two = _forecast(fast, db)
        assert after_two["drills"] == 2 and after_two["basis"].startswith("2 drills; the last")
        low, high = after_two["interval"]
        assert low <= after_two["rto_seconds"] <= high
        assert after_two["dominant_phase"] and after_two["dominant_workload"]
        third = _drill(fast, db)
        measured = third["rto_seconds"]
        assert low <= measured <= high, (measured, after_two)
        recorded = third["forecast"]  # the preflight's forecast, beside what was measured
        assert recorded["drills"] == 2 and recorded["inside_interval"] is True
        assert recorded["error_seconds"] == pytest.approx(
            measured - recorded["rto_seconds"], abs=0.1
        )
        fast_forecast = _forecast(fast, db)["rto_seconds"]
    with own_lab(tmp_path_factory, "forecast-slow", ready_delay=4.0) as slow:
        slow_run = _drill(slow, db)
        # The critical tier's pods take about 3.8 s longer to become ready.
        assert slow_run["rto_seconds"] > after_two["rto_seconds"] + 2.5
        slower = _forecast(slow, db)
    assert slower["rto_seconds"] > fast_forecast + 1, (slower, fast_forecast)
    assert slower["drills"] == 4
