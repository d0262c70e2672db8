"""THE PROOF: kill a drill by SIGKILL at every step boundary and at every point inside a
change, run `drills recover`, and find the systems exactly as they were before.

The points are not a hand-kept list: one drill runs first with a hook that records
every point it passes, in order, and the matrix is whatever that drill went through.
One lab is reused: each recover must restore it, and the snapshot is compared after
every point, so a recover that left anything behind fails that point and the next.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from drills.cli import app
from drills.store.history import HistoryStore
from drills.takeover import crashpoints
from drills.takeover.drill import Drill, DrillHooks, DrillRequest
from drills_lab.runtime import LabInfo
from tests.support.drill import lab_plan, snapshot
from tests.support.gc_tuning import frozen_while_forking
from tests.support.services import own_lab

log = logging.getLogger("drills.tests.crash_matrix")


def _cli_child(argv: list[str], crash_at: str, output: str) -> None:
    os.environ[crashpoints.ENV] = crash_at
    with open(output, "w") as out:
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
    app(argv, prog_name="drills")


def run_cli_process(argv: list[str], crash_at: str, output: Path) -> int | None:
    """`drills <argv>` in a process of its own with DRILLS_CRASH_AT set; its exit code.

    The process is forked from this one, which has imported drills already: a fresh
    interpreter would spend seconds on imports at each of the many points.
    """
    process = multiprocessing.get_context("fork").Process(
        target=_cli_child, args=(argv, crash_at, str(output))
    )
    with frozen_while_forking():
        process.start()
    process.join(180)
    if process.is_alive():
        process.kill()
        process.join()
    return process.exitcode


@pytest.fixture(scope="module")
def crash_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    with own_lab(tmp_path_factory, "crash-lab", ready_delay=0.1) as info:
        yield info


def test_a_crash_point_fires_only_on_its_name_and_occurrence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(crashpoints.ENV, raising=False)
    assert crashpoints.wanted() is None
    crashpoints.point("phase:fence:start")  # no target: nothing happens
    probe = (
        "from drills.takeover import crashpoints\n"
        "for i in range(3):\n"
        "    crashpoints.point('other')\n"
        "    crashpoints.point('x')\n"
        "    print(i, flush=True)\n"
    )
    env = os.environ | {crashpoints.ENV: "x#2"}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL
    assert done.stdout.split() == ["0"]  # died at the second 'x', before printing 1


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_sigkill_at_every_point_then_recover_restores_the_original_state(
    crash_lab: LabInfo, tmp_path: Path
) -> None:
    plan_file = Path(crash_lab.state_dir) / "plan.yaml"
    plan = lab_plan(crash_lab)
    db = f"sqlite:///{tmp_path / 'history.db'}"
    original = snapshot(plan)

    points: list[str] = []
    request = DrillRequest(plan, operator="tests", tier_deadline_s=20, plan_path=str(plan_file))
    result = Drill(request, HistoryStore(db), DrillHooks(crash_point=points.append)).run()
    assert result.status == "succeeded", result.error
    assert snapshot(plan) == original
    kinds = {p.split(" ")[-1] for p in points if not p.startswith("phase:")}
    assert kinds == {"journalled", "written"}, kinds  # inside changes, both moments
    assert any(p.startswith("undo ") for p in points)  # and inside the failback
    assert "phase:fence:start" in points and "phase:verify failback:end" in points
    assert len(points) == len(set(points)), "a point name repeats: it would need name#N"

    failed: dict[str, str] = {}
    argv = ["run", str(plan_file), "--yes", "--db", db, "--tier-deadline", "20"]
    for name in points:
        output = tmp_path / "run.log"
        exitcode = run_cli_process(argv, name, output)
        if exitcode != -signal.SIGKILL:
            failed[name] = f"not killed: exit {exitcode}: {output.read_text()[-400:]}"
            break
        recovered = CliRunner().invoke(app, ["recover", "--plan", plan.name, "--db", db])
        after = snapshot(plan)
        if recovered.exit_code != 0 or after != original:
            failed[name] = f"recover exit {recovered.exit_code}: {recovered.output[-600:]}"
            break
        log.info("crash at %r: recovered to the original state", name)
    passed = len(points) - len(failed)
    print(f"\ncrash matrix: {passed}/{len(points)} points recovered to the original state")
    assert not failed, failed
    assert HistoryStore(db).unfinished_runs(plan.name) == []
