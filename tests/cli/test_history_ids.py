"""`drills history` on an 80-column terminal shows ids that `drills report` accepts as shown:
never cut to `c6eac…`, even when two runs share a long prefix."""

from __future__ import annotations

import os
from pathlib import Path

from typer.testing import CliRunner

from drills.cli.app import app
from drills.store.kinds import Mode
from tests.evidence.support import make_run, store_with
from tests.support.cli import drills_process

runner = CliRunner()

# Two ids alike for 12 characters and one alike for 5: the prefixes shown must tell them apart.
IDS = [
    "c6eac0d1e2f3" + "a" * 20,
    "c6eac0d1e2f3" + "b" * 20,
    "c6eac9" + "c" * 26,
]


def _shown_ids(table: str) -> list[str]:
    """The first cell of every row of the history table (continuation lines have none)."""
    cells = [line.split("│")[1].strip() for line in table.splitlines() if line.startswith("│")]
    return [cell for cell in cells if cell]


def test_history_ids_at_80_columns_are_accepted_by_report(tmp_path: Path) -> None:
    store = store_with(
        tmp_path,
        *(make_run(run_id, plan="payments-eu-west-primary-to-dr", days=i, mode=Mode.INCIDENT)
          for i, run_id in enumerate(IDS)),
    )  # fmt: skip
    db = store.url
    store.close()
    env = {**os.environ, "COLUMNS": "80"}
    listed = drills_process(["history", "--db", db], timeout=120, env=env)
    listed.check_returncode()
    shown = listed.stdout

    assert max(len(line) for line in shown.splitlines()) <= 80, shown
    assert "…" not in "".join(_shown_ids(shown)), shown
    ids = _shown_ids(shown)
    assert len(ids) == len(IDS), shown
    for prefix, full in zip(ids, reversed(IDS), strict=True):  # newest first
        assert full.startswith(prefix) and len(prefix) >= 8, (prefix, full)
        report = runner.invoke(app, ["report", prefix, "--format", "json", "--db", db])
        assert report.exit_code == 0, report.output
        assert f'"id": "{full}"' in report.output
    assert ids[1] != ids[2] and len(ids[1]) == 13, ids  # the pair alike for 12 needs 13
