"""`drills recover --plan`: a plan's name, or a plan file given where the name belongs.

A path there used to be taken for a plan's name ("plan .lab/plan.yaml has no unfinished
run"): wrong, and no help. A file that loads as a plan stands for its plan; any other
path is a usage error that points at --plan-file.
"""

from __future__ import annotations

from pathlib import Path

from drills_lab.runtime import LabInfo
from tests.support.drill import drills_cli


def test_a_plan_file_stands_for_its_plan(lab: LabInfo, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'history.db'}"
    plan = str(Path(lab.state_dir) / "plan.yaml")

    nothing = drills_cli("recover", "--plan", plan, db=db)
    assert nothing.returncode == 1
    assert "plan lab has no unfinished run" in nothing.stderr, nothing.stderr

    # An incident that died as its fence began: unfinished, and nothing changed yet.
    died = drills_cli(
        "run", plan, "--mode", "incident", "--yes", db=db, crash_at="phase:fence:start"
    )
    assert died.returncode != 0
    found = drills_cli("recover", "--plan", plan, db=db)
    assert found.returncode == 3, found.stdout + found.stderr  # reported; a person decides
    assert "is part-way" in found.stderr and "(incident of lab)" in found.stdout


def test_a_path_that_is_no_plan_points_at_plan_file(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'history.db'}"
    not_a_plan = tmp_path / "notes.yaml"
    not_a_plan.write_text("just: notes\n")
    for value, problem in [
        (str(tmp_path / "missing" / "plan.yaml"), "no such file exists"),
        (str(not_a_plan), "is a file, but not a valid plan"),
    ]:
        result = drills_cli("recover", "--plan", value, db=db)
        assert result.returncode == 2, result.stdout + result.stderr
        said = " ".join(result.stderr.split())  # the console wraps long lines
        assert "--plan takes a plan's name" in said and "--plan-file" in said
        assert problem in said and "no unfinished run" not in said
