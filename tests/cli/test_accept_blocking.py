"""`drills run --accept-blocking CHECK`: refused in one line, before any plan is read or
any store opened, unless it names known checks, for a drill or a practice, with a reason.
What it does on the lab: tests/capacity/test_carry_lab.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from drills.cli import app

REASON = ["--reason", "see how far a short DR gets"]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--accept-blocking", "capacity.carry"], "needs a --reason"),
        (["--accept-blocking", "capacity.cary", *REASON], "no check capacity.cary"),
        (["--accept-blocking", "capacity.carry", "--mode", "incident", *REASON],
         "belongs to a drill or a practice"),
    ],
)  # fmt: skip
def test_bad_use_is_refused_before_anything_is_read(
    tmp_path: Path, extra: list[str], said: str
) -> None:
    plan, db = tmp_path / "missing.yaml", tmp_path / "h.db"
    answer = CliRunner().invoke(app, ["run", str(plan), "--yes", "--db", f"sqlite:///{db}",
                                      *extra])  # fmt: skip
    assert answer.exit_code == 2, answer.output
    assert said in " ".join(answer.output.split())
    assert not db.exists()  # refused before the store was opened
