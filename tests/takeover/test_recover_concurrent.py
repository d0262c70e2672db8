"""Two `drills recover` of one run at once: one recovers it, the other is refused (exit 3)
and names the one that got there first."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import select

from drills.lab.runtime import LabInfo
from drills.plan.claims import plan_claims
from drills.store.history import HistoryStore
from drills.store.kinds import RunStatus
from drills.store.models import TargetLease
from drills.takeover.lease import current
from tests.support.drill import lab_plan, snapshot
from tests.support.services import own_lab
from tests.takeover.test_recover import crash_at


@pytest.fixture(scope="module")
def race_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    with own_lab(tmp_path_factory, "recover-race-lab", ready_delay=0.1) as info:
        yield info


def _winner(history: HistoryStore, plan: str, claims: int, pids: set[int]) -> tuple[int, str]:
    """The pid and lease holder of the recover that took the plan's lease, once it holds
    every target too (so it is past its writes to the store, reading the sites)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        lease = current(history, plan)
        if lease is not None and int(lease.holder.split(":")[1]) in pids:
            with history.session() as s:
                held = s.scalars(select(TargetLease).where(TargetLease.holder == lease.holder))
                if len(list(held)) == claims:
                    return int(lease.holder.split(":")[1]), lease.holder
        time.sleep(0.01)
    raise AssertionError("neither recover took the plan's lease")


def test_of_two_concurrent_recovers_one_wins_and_the_other_exits_3_naming_it(
    race_lab: LabInfo, history: HistoryStore
) -> None:
    plan = lab_plan(race_lab)
    original = snapshot(plan)
    run_id = crash_at(race_lab, history, "phase:smoke:start")
    assert snapshot(plan) != original
    argv = [sys.executable, "-m", "drills", "recover", run_id, "--db", history.url]
    env = os.environ | {"COLUMNS": "250"}
    both = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    try:
        pid, holder = _winner(history, plan.name, len(plan_claims(plan)), {p.pid for p in both})
        winner = next(p for p in both if p.pid == pid)
        loser = next(p for p in both if p.pid != pid)
        # The winner is held still while it holds the lease: however slowly the other
        # starts, it finds the lease taken, as it would behind a slow recover.
        os.kill(winner.pid, signal.SIGSTOP)
        try:
            _, lost = loser.communicate(timeout=120)
        finally:
            os.kill(winner.pid, signal.SIGCONT)
        out, err = winner.communicate(timeout=300)
    finally:
        for process in both:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert loser.returncode == 3, lost
    assert "Traceback" not in lost
    assert f"recover refused: run {run_id} is being recovered by another `drills recover`" in lost
    assert f"process {winner.pid} on {socket.gethostname()} ({holder})" in lost
    assert winner.returncode == 0, out + err
    assert "recovered (rollback)" in out
    assert snapshot(plan) == original
    done = history.get_run(run_id)
    assert done is not None and done.status == RunStatus.RECOVERED
    assert [attempt.status for attempt in done.details.recover] == [RunStatus.RECOVERED]
