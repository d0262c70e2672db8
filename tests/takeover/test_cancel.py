"""Cancelling is not a crash: Ctrl-C (SIGINT) or SIGTERM on `drills run` rolls a drill back
at once to the exact original state; an incident stops where it is and says so.

The stalled lab's DR bring-up never finishes, and the runs get a 10-minute tier deadline:
a run that waited out its waits before rolling back would outlive the test's timeout.
Cancelling through Prefect and from the dashboard is in test_serve.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from drills.store.history import HistoryStore
from drills.takeover.journal import Journal
from drills_lab.runtime import LabInfo
from tests.support.drill import back_to_normal, lab_plan, serving, snapshot

# Well past the test's own timeout: only a run that stops waiting at once can pass.
TIER_DEADLINE_S = "600"
ROLLED_BACK_WITHIN_S = 120


def start_run(info: LabInfo, db: str, *extra: str) -> subprocess.Popen[str]:
    plan_file = Path(info.state_dir) / "plan.yaml"
    return subprocess.Popen(
        [sys.executable, "-m", "drills", "run", str(plan_file), "--yes", "--db", db,
         "--tier-deadline", TIER_DEADLINE_S, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"},
    )  # fmt: skip


def output_once_stopped(proc: subprocess.Popen[str]) -> str:
    """The run's output once it has exited. One that has not within ROLLED_BACK_WITHIN_S is
    aborted, and the stacks of its threads (faulthandler's, on SIGABRT) go into the failure:
    a hang says where it is."""
    try:
        return proc.communicate(timeout=ROLLED_BACK_WITHIN_S)[0]
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        output = proc.communicate(timeout=30)[0]
        raise AssertionError(
            f"the run did not stop within {ROLLED_BACK_WITHIN_S} s:\n{output[-8000:]}"
        ) from None


def wait_dr_scale_up(history: HistoryStore, plan: str, proc: subprocess.Popen[str]) -> str:
    """Wait until the run has journalled a change at DR; returns the run id."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before it could be cancelled"
        for run in history.list_runs(plan=plan, limit=1):
            if any(c.target.startswith("dr/") for c in Journal(history, run.id).changes()):
                return run.id
        time.sleep(0.02)
    raise AssertionError("DR never started scaling up")


def eventually_serving(url: str, within_s: float = 30.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if serving(url):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_cancelling_a_drill_rolls_back_to_the_original_state(
    stalled_lab: LabInfo, tmp_path: Path, sig: signal.Signals
) -> None:
    plan = lab_plan(stalled_lab)
    original = snapshot(plan)
    db = f"sqlite:///{tmp_path / 'history.db'}"
    history = HistoryStore(db)
    proc = start_run(stalled_lab, db)
    try:
        run_id = wait_dr_scale_up(history, plan.name, proc)
        proc.send_signal(sig)
        output = output_once_stopped(proc)
    finally:
        proc.kill()
    assert proc.returncode == 1, output
    assert snapshot(plan) == original
    run = history.get_run(run_id)
    assert run is not None and run.status == "cancelled" and run.finished_at is not None
    assert run.error and f"cancelled by {sig.name}" in run.error
    assert {c.state for c in Journal(history, run_id).changes()} <= {"undone", "failed"}
    assert [p["name"] for p in run.timeline][-2:] == ["rollback", "verify rollback"]
    assert eventually_serving(stalled_lab.endpoints["primary"])  # once its pods are ready again
    assert history.unfinished_runs(plan.name) == []


def test_cancelling_an_incident_stops_where_it_is_and_reports(
    stalled_lab: LabInfo, tmp_path: Path
) -> None:
    plan = lab_plan(stalled_lab)
    original = snapshot(plan)
    db = f"sqlite:///{tmp_path / 'history.db'}"
    history = HistoryStore(db)
    proc = start_run(stalled_lab, db, "--mode", "incident")
    run_id = ""
    try:
        run_id = wait_dr_scale_up(history, plan.name, proc)
        proc.send_signal(signal.SIGINT)
        output = output_once_stopped(proc)
        assert proc.returncode == 1, output
        run = history.get_run(run_id)
        assert run is not None and run.status == "cancelled" and run.verdict == "cancelled"
        assert run.error and "--complete" in run.error and "--hold" in run.error
        # Stopped, not failed back: the primary stays fenced, the journal says what is done.
        assert not serving(stalled_lab.endpoints["primary"])
        states = {c.state for c in Journal(history, run_id).changes()}
        assert "applied" in states and "undone" not in states
        assert "cancelled" in output
        # It holds the plan until an operator decides: no new run starts on top of it.
        assert [r.id for r in history.unfinished_runs(plan.name)] == [run_id]
        again = start_run(stalled_lab, db)
        refused, _ = again.communicate(timeout=60)
        assert again.returncode != 0 and f"drills recover {run_id}" in " ".join(refused.split())
        held = subprocess.run(
            [sys.executable, "-m", "drills", "recover", run_id, "--hold", "--db", db],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert held.returncode == 0, held.stdout + held.stderr
        assert history.unfinished_runs(plan.name) == []
    finally:
        proc.kill()
        if run_id:
            back_to_normal(plan, history, run_id)
    assert snapshot(plan) == original
