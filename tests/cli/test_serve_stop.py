"""`drills serve` has one way to stop: `drills serve stop [--force]`; `--stop` is gone."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from drills.cli.app import app

runner = CliRunner()


def test_serve_stops_only_by_its_stop_command(tmp_path: Path) -> None:
    assert "--stop" not in runner.invoke(app, ["serve", "--help"]).output
    stop_help = runner.invoke(app, ["serve", "stop", "--help"]).output
    assert "--force" in stop_help

    refused = runner.invoke(app, ["serve", "--stop", "--state-dir", str(tmp_path)])
    assert refused.exit_code == 2 and "No such option" in refused.output, refused.output

    stopped = runner.invoke(app, ["serve", "stop", "--state-dir", str(tmp_path)])
    assert stopped.exit_code == 0, stopped.output
    assert "No local Prefect server runs from" in stopped.output
