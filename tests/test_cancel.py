"""Cancelling is not a crash: Ctrl-C (SIGINT) or SIGTERM on `drills run` rolls a drill back
at once to the exact original state; an incident stops where it is and says so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from drills.history import HistoryStore
from drills.journal import Journal
from drills.lab.runtime import LabInfo
from tests.conftest import own_lab
from tests.drill_support import back_to_normal, lab_plan, snapshot


@pytest.fixture(scope="module")
def cancel_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    # Workloads take 2 s to become ready: a window to cancel in while DR scales up.
    with own_lab(tmp_path_factory, "cancel-lab", ready_delay=2.0) as info:
        yield info


def start_run(info: LabInfo, db: str, *extra: str) -> subprocess.Popen[str]:
    plan_file = Path(info.state_dir) / "plan.yaml"
    return subprocess.Popen(
        [sys.executable, "-m", "drills", "run", str(plan_file), "--yes", "--db", db,
         "--tier-deadline", "30", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )  # fmt: skip


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


def serving(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def eventually_serving(url: str, within_s: float = 30.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if serving(url):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_cancelling_a_drill_rolls_back_to_the_original_state(
    cancel_lab: LabInfo, tmp_path: Path, sig: signal.Signals
) -> None:
    plan = lab_plan(cancel_lab)
    original = snapshot(plan)
    db = f"sqlite:///{tmp_path / 'history.db'}"
    history = HistoryStore(db)
    proc = start_run(cancel_lab, db)
    try:
        run_id = wait_dr_scale_up(history, plan.name, proc)
        proc.send_signal(sig)
        output, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 1, output
    assert snapshot(plan) == original
    run = history.get_run(run_id)
    assert run is not None and run.status == "cancelled" and run.finished_at is not None
    assert run.error and f"cancelled by {sig.name}" in run.error
    assert {c.state for c in Journal(history, run_id).changes()} <= {"undone", "failed"}
    assert [p["name"] for p in run.timeline][-2:] == ["rollback", "verify rollback"]
    assert eventually_serving(cancel_lab.endpoints["primary"])  # once its pods are ready again
    assert history.unfinished_runs(plan.name) == []


def test_cancelling_an_incident_stops_where_it_is_and_reports(
    cancel_lab: LabInfo, tmp_path: Path
) -> None:
    plan = lab_plan(cancel_lab)
    original = snapshot(plan)
    db = f"sqlite:///{tmp_path / 'history.db'}"
    history = HistoryStore(db)
    proc = start_run(cancel_lab, db, "--mode", "incident")
    run_id = ""
    try:
        run_id = wait_dr_scale_up(history, plan.name, proc)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
        assert proc.returncode == 1, output
        run = history.get_run(run_id)
        assert run is not None and run.status == "cancelled"
        assert run.error and "--complete" in run.error and "--hold" in run.error
        # Stopped, not failed back: the primary stays fenced, the journal says what is done.
        assert not serving(cancel_lab.endpoints["primary"])
        states = {c.state for c in Journal(history, run_id).changes()}
        assert "applied" in states and "undone" not in states
        assert "cancelled" in output
    finally:
        proc.kill()
        if run_id:
            back_to_normal(plan, history, run_id)
    assert snapshot(plan) == original
