"""`--only APP` on the command line: an application the plan does not have is one line and
exit 2, naming the applications it has, before anything is read or recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from drills.cli.app import app
from tests.support.drill import offline_lab_plan_data

runner = CliRunner()


@pytest.fixture()
def plan_file(tmp_path: Path) -> Path:
    data = offline_lab_plan_data()
    data["applications"] = [
        {"name": "training", "workloads": ["training/trainer"]},
        {"name": "platform", "workloads": ["platform/model-registry"]},
    ]
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize("mode", ["drill", "practice", "incident"])
def test_an_unknown_application_is_one_line_and_exit_2(
    plan_file: Path, tmp_path: Path, mode: str
) -> None:
    db = tmp_path / "history.db"
    argv = ["run", str(plan_file), "--only", "billing", "--mode", mode, "--yes"]
    result = runner.invoke(app, [*argv, "--db", f"sqlite:///{db}"])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        "plan lab has no application 'billing' (its applications: training, platform)"
    ]
    assert not db.exists()  # refused before the store was opened


def test_readiness_of_an_unknown_application_is_exit_2(plan_file: Path, tmp_path: Path) -> None:
    argv = ["readiness", str(plan_file), "--application", "billing", "--no-store"]
    result = runner.invoke(app, [*argv, "--db", f"sqlite:///{tmp_path / 'h.db'}"])
    assert result.exit_code == 2, result.output
    assert "its applications: training, platform" in result.output
    assert "Traceback" not in result.output


def test_only_does_not_apply_to_a_failback(plan_file: Path, tmp_path: Path) -> None:
    argv = ["run", str(plan_file), "--mode", "failback", "--only", "training", "--yes"]
    result = runner.invoke(app, [*argv, "--db", f"sqlite:///{tmp_path / 'h.db'}"])
    assert result.exit_code == 2, result.output
    assert "--only does not apply to a failback" in result.output


def test_the_run_help_explains_only() -> None:
    result = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "--only" in result.output and "this application of the plan" in result.output
