"""Answering no at `drills run`'s "Proceed?" exits 4 and leaves nothing behind: no run in the
history (so no aborted drill, no report, nothing for the Fleet page to count)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from drills.cli.app import app
from drills.store.history import HistoryStore
from drills_lab.runtime import LabInfo
from tests.support.drill import lab_plan, lab_plan_file, snapshot

runner = CliRunner()


def test_declining_the_prompt_exits_4_and_records_no_run(lab: LabInfo, tmp_path: Path) -> None:
    plan = lab_plan(lab)
    before = snapshot(plan)
    db = f"sqlite:///{tmp_path}/history.db"
    result = runner.invoke(app, ["run", str(lab_plan_file(lab)), "--db", db], input="n\n")

    assert result.exit_code == 4, result.output
    assert "ingress.class primary/serving/public" in result.output  # the changes were shown
    assert "Proceed?" in result.output
    assert "declined: nothing was changed and no run was recorded" in result.output
    assert "# Drill report" not in result.output
    store = HistoryStore(db)
    try:
        assert store.list_runs() == []
        assert store.list_runs(plan=plan.name) == []
    finally:
        store.close()
    assert snapshot(plan) == before
