"""Losing the orchestrator: two workers on one work pool of a Prefect server backed by
PostgreSQL, the history store on PostgreSQL too. The worker running a drill is killed with
SIGKILL, with its flow-run process, mid bring-up; the other worker's scheduled
recover-orphans run rolls the drill back within the documented bound.

Long (about three minutes: a server, two workers, a readiness run, a drill, its recovery),
and part of `make test` like every slow test.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest

from drills.orchestrator import serve
from drills.orchestrator.rest import PrefectRest
from drills.processes import descendants, marked, pid_alive
from drills.store.history import HistoryStore
from drills.store.kinds import RunStatus
from drills.takeover.orphans import ORPHAN_BOUND_S
from drills.takeover.snapshot import differences
from drills_lab.procs import free_port
from tests.orchestrator.test_serve import drills, wait_dr_change
from tests.support.drill import lab_plan, snapshot, stall_dr_bring_up
from tests.support.postgres import PostgresServer
from tests.support.services import own_lab

SECOND_WORKER = "drills-second-worker"
# The flow-run process the worker starts takes a few seconds to import drills and Prefect.
STARTUP_SLACK_S = 45


def kill_tree(pid: int) -> list[int]:
    """SIGKILL a worker and everything below it at once, as a host that dies."""
    tree = [pid, *descendants(pid)]
    for member in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(member, signal.SIGKILL)
    deadline = time.monotonic() + 10  # SIGKILL is not synchronous: wait for the kernel
    while any(pid_alive(p) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    return tree


def the_busy_worker(workers: dict[str, int], flow_run_id: str) -> tuple[str, int]:
    """The worker whose flow-run process runs the drill: the one whose tree holds the
    process started for that flow run (the other may still be reaping the readiness run)."""
    running = set(marked("PREFECT__FLOW_RUN_ID", flow_run_id))
    busy = [(name, pid) for name, pid in workers.items() if running & set(descendants(pid))]
    assert len(busy) == 1, (busy, running)
    return busy[0]


def wait_recovered(history: HistoryStore, run_id: str, timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        run = history.get_run(run_id)
        assert run is not None
        if run.finished_at is not None:
            return time.monotonic() - started
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} was not recovered within {timeout:.0f}s")


@pytest.mark.slow
# Serial, at a higher CPU priority than the rest: its bound is the product's documented one,
# and a recover-orphans flow run that starts behind three other workers' labs can miss it.
@pytest.mark.serial
@pytest.mark.timeout(600)
def test_a_drill_whose_worker_dies_mid_bring_up_is_rolled_back_by_the_other(
    postgres: PostgresServer,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    history_db, prefect_db = postgres.create_database(), postgres.create_database()
    monkeypatch.setenv("DRILLS_DB_URL", history_db)  # the workers' flow runs inherit it
    history = HistoryStore(history_db)
    state = tmp_path_factory.mktemp("loss") / "prefect-local"
    with own_lab(tmp_path_factory, "loss-lab", ready_delay=0.2) as lab:
        stall_dr_bring_up(lab)  # bring-up waits: the window to kill the worker in
        plan = lab_plan(lab)
        plan_file = str(Path(lab.state_dir) / "plan.yaml")
        before = snapshot(plan)
        project = tmp_path_factory.mktemp("loss-project")  # a demo's files here stay unread
        info, _ = serve.up(state, project_dir=project, port=free_port(), database=prefect_db)
        second = 0
        try:
            assert info.prefect_db.startswith("postgresql") and info.worker_pid
            second = serve.start_worker(
                info, SECOND_WORKER, state / "second-worker.log", time.monotonic() + 120
            )
            with PrefectRest(info.api_url) as api:
                online = {w.name for w in api.workers(serve.WORK_POOL) if w.status == "ONLINE"}
            assert online == {serve.WORKER_NAME, SECOND_WORKER}

            # The readiness deployment runs on the server backed by PostgreSQL.
            ready = drills("serve", "run", "readiness-check", "--state-dir", str(state),
                           "--timeout", "180", "-p", f"plan={plan_file}")  # fmt: skip
            assert ready.returncode == 0 and "Completed" in ready.stderr, ready.stderr
            assert history.latest_readiness(plan.name) is not None

            # The drill deployment, killed with its worker while DR is coming up.
            started = drills("serve", "run", "quarterly-drill", "--state-dir", str(state),
                             "--no-wait", "-p", f"plan={plan_file}", "-p", "lease_s=10",
                             "-p", "reason=orchestrator loss")  # fmt: skip
            assert started.returncode == 0, started.stderr
            flow_run_id = started.stderr.strip().rsplit("/", 1)[-1]
            run_id = wait_dr_change(history, flow_run_id)
            name, victim = the_busy_worker(
                {serve.WORKER_NAME: info.worker_pid, SECOND_WORKER: second}, flow_run_id
            )
            killed = kill_tree(victim)
            assert not any(pid_alive(pid) for pid in killed)

            took = wait_recovered(history, run_id, ORPHAN_BOUND_S + STARTUP_SLACK_S)
            run = history.get_run(run_id)
            assert run is not None and run.status == RunStatus.RECOVERED, (run.status, run.error)
            [attempt] = run.details.recover
            assert attempt.action == "rollback" and attempt.drift == {}
            assert differences(before, snapshot(plan)) == {}
            assert history.unfinished_runs(plan.name) == []
            print(f"{name} killed; run {run_id} recovered {took:.1f}s later")
        finally:
            if second:
                kill_tree(second)
            serve.down(state)
    history.close()
