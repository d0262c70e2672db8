"""One drill at a time per plan: the lease, its expiry and takeover, and two starts at once."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from drills.cli import app
from drills.plan import DrillPlan, load_plan
from drills.store.history import HistoryStore
from drills.store.models import DrillRun, Lease, TargetLease
from drills.takeover import crashpoints, lease
from drills.takeover.drill import Drill, DrillHooks, DrillRequest
from drills.takeover.lease import LeaseHeldError, PlanLease, UnfinishedRunError
from drills.takeover.steps.executor import PlannedChange
from drills_lab.runtime import LabInfo
from tests.support.drill import drills_cli, lab_plan
from tests.support.postgres import PostgresServer
from tests.support.services import own_lab


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_lease_is_exclusive_until_released(history: HistoryStore) -> None:
    lease.acquire(history, "lab", "run-a", "me:1:a")
    with pytest.raises(LeaseHeldError) as refused:
        lease.acquire(history, "lab", "run-b", "me:2:b")
    assert refused.value.run_id == "run-a" and "drills recover run-a" in str(refused.value)
    lease.acquire(history, "other-plan", "run-c", "me:3:c")  # per plan
    assert not lease.renew(history, "lab", "me:2:b")  # not the holder: cannot renew
    lease.release(history, "lab", "me:2:b")  # not the holder: releases nothing
    assert (held := lease.current(history, "lab")) is not None and held.run_id == "run-a"
    lease.release(history, "lab", "me:1:a")
    lease.acquire(history, "lab", "run-b", "me:2:b")
    assert (held := lease.current(history, "lab")) is not None and held.run_id == "run-b"


def test_an_expired_lease_or_a_dead_local_holder_is_taken_over(history: HistoryStore) -> None:
    lease.acquire(history, "lab", "run-a", "elsewhere:1:a", lease_s=0.2)
    with pytest.raises(LeaseHeldError):
        lease.acquire(history, "lab", "run-b", "me:2:b")
    time.sleep(0.3)
    lease.acquire(history, "lab", "run-b", "me:2:b")  # expired: taken over
    assert (held := lease.current(history, "lab")) is not None and held.run_id == "run-b"

    import socket

    dead = f"{socket.gethostname()}:{_dead_pid()}:x"
    lease.acquire(history, "p2", "run-c", dead, lease_s=600)
    assert lease.holder_is_dead(dead)
    lease.acquire(history, "p2", "run-d", "me:4:d")  # its process is gone: no need to wait
    assert (held := lease.current(history, "p2")) is not None and held.run_id == "run-d"
    alive = f"{socket.gethostname()}:{__import__('os').getpid()}:y"
    assert not lease.holder_is_dead(alive) and not lease.holder_is_dead("otherhost:1:z")


def test_the_heartbeat_keeps_a_short_lease_alive_and_release_ends_it(history: HistoryStore) -> None:
    with PlanLease(history, "lab", "run-a", lease_s=0.5, renew_s=0.1) as held:
        time.sleep(1.0)  # twice the lease: only renewals keep it
        row = lease.current(history, "lab")
        assert row is not None and row.holder == held.holder
        assert row.expires_at > dt.datetime.now(dt.UTC)
        with pytest.raises(LeaseHeldError):
            lease.acquire(history, "lab", "run-b", "elsewhere:9:b")
    assert lease.current(history, "lab") is None


def test_two_concurrent_starts_give_one_run_and_one_clear_refusal(
    lab: LabInfo, history: HistoryStore
) -> None:
    """On the shared lab: the one that wins stops at confirmation, so nothing changes."""
    plan = lab_plan(lab)
    start = threading.Barrier(2)
    loser_done = threading.Event()
    refusals: list[Exception] = []
    statuses: list[str] = []

    def confirm(_planned: list[PlannedChange]) -> bool:
        loser_done.wait(60)  # hold the lease until the other start has been refused
        return False

    def start_one() -> None:
        request = DrillRequest(plan, operator="tests", tier_deadline_s=20)
        drill = Drill(request, history, DrillHooks(confirm=confirm))
        start.wait()
        try:
            statuses.append(drill.run().status)
        except LeaseHeldError as exc:
            refusals.append(exc)
            loser_done.set()

    threads = [threading.Thread(target=start_one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert statuses == ["aborted"] and len(refusals) == 1
    runs = history.list_runs(plan=plan.name)
    assert len(runs) == 1 and runs[0].status == "aborted"
    message = str(refusals[0])
    assert f"run {runs[0].id} holds its lease" in message and "drills recover" in message
    assert lease.current(history, plan.name) is None  # the winner released it


def test_a_plan_with_an_unfinished_run_refuses_a_new_one_and_says_how_to_recover(
    lab: LabInfo, history: HistoryStore
) -> None:
    plan = lab_plan(lab)
    now = dt.datetime.now(dt.UTC)
    history.create_run(
        DrillRun(id="crashed1", plan=plan.name, plan_digest="x", mode="drill", operator="t",
                 status="running", started_at=now)
    )  # fmt: skip
    with pytest.raises(UnfinishedRunError, match="drills recover crashed1"):
        Drill(DrillRequest(plan, operator="tests"), history).run()
    assert [r.id for r in history.list_runs(plan=plan.name)] == ["crashed1"]
    assert lease.current(history, plan.name) is None
    refused = CliRunner().invoke(
        app, ["run", str(Path(lab.state_dir) / "plan.yaml"), "--yes", "--db", history.url]
    )
    assert refused.exit_code == 3
    assert "drills recover crashed1" in " ".join(refused.output.split())


def test_a_short_lease_is_renewed_well_before_it_expires(history: HistoryStore) -> None:
    assert PlanLease(history, "lab", "run-a", lease_s=3).renew_s == 1.0
    assert PlanLease(history, "lab", "run-a").renew_s == lease.RENEW_S
    assert PlanLease(history, "lab", "run-a", lease_s=3, renew_s=0.1).renew_s == 0.1


def _renamed(lab: LabInfo, name: str) -> Path:
    """A copy of the lab's plan under another name, beside it (its references resolve)."""
    import yaml

    source = Path(lab.state_dir) / "plan.yaml"
    data = yaml.safe_load(source.read_text())
    data["name"] = name
    copy = Path(lab.state_dir) / f"{name}.yaml"
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    return copy


def test_plans_sharing_targets_claim_the_same_workloads_dns_record_and_buckets(
    lab: LabInfo,
) -> None:
    from drills.plan import load_plan
    from drills.plan.claims import plan_claims, shared_claims

    a, b = (load_plan(_renamed(lab, n)) for n in ("claims-a", "claims-b"))
    claims = plan_claims(a)
    assert claims == plan_claims(b)
    kinds = {c.kind for c in claims}
    assert kinds == {"workload", "dns", "bucket"}
    assert any("llm-server" in c.key and c.key.startswith("https://") for c in claims)
    shared = shared_claims([a, b])
    assert shared and all(s.plans == ("claims-a", "claims-b") for s in shared)
    assert {s.claim.kind for s in shared} == {"workload", "dns", "bucket"}
    assert {s.claim.kind for s in shared_claims([a, b], ("dns",))} == {"dns"}


def test_a_target_held_by_another_plan_refuses_the_second_with_exit_3_naming_it(
    lab: LabInfo, history: HistoryStore, tmp_path: Path
) -> None:
    from drills.plan import load_plan
    from drills.plan.claims import plan_claims

    first = load_plan(_renamed(lab, "fleet-first"))
    second = _renamed(lab, "fleet-second")
    with PlanLease(history, first.name, "run-first", claims=plan_claims(first)):
        with pytest.raises(lease.TargetBusyError) as busy:
            lease.acquire_targets(
                history, "fleet-second", "run-2", "me:2:b", plan_claims(load_plan(second))
            )
        assert busy.value.other_plan == "fleet-first" and busy.value.run_id == "run-first"
        refused = CliRunner().invoke(app, ["run", str(second), "--yes", "--db", history.url])
        assert refused.exit_code == 3, refused.output
        words = " ".join(refused.output.split())
        assert "plan fleet-first (run run-first)" in words and "fleet-second" in words
        assert history.list_runs(plan="fleet-second") == []
        assert lease.current(history, "fleet-second") is None  # its own lease given back
    # Released with the plan's lease: the second may run now (stopped at confirmation).
    lease.acquire_targets(history, "fleet-second", "run-3", "me:3:c", plan_claims(first))
    lease.release_targets(history, "me:3:c")


def test_two_plans_over_one_site_started_together_give_one_run_and_one_refusal(
    lab: LabInfo, history: HistoryStore
) -> None:
    from drills.plan import load_plan

    plans = [load_plan(_renamed(lab, n)) for n in ("together-a", "together-b")]
    start = threading.Barrier(2)
    loser_done = threading.Event()
    refusals: list[lease.TargetBusyError] = []
    statuses: list[str] = []

    def confirm(_planned: list[PlannedChange]) -> bool:
        loser_done.wait(60)
        return False

    def start_one(plan: DrillPlan) -> None:
        request = DrillRequest(plan, operator="tests", tier_deadline_s=20)
        drill = Drill(request, history, DrillHooks(confirm=confirm))
        start.wait()
        try:
            statuses.append(drill.run().status)
        except lease.TargetBusyError as exc:
            refusals.append(exc)
            loser_done.set()

    threads = [threading.Thread(target=start_one, args=(p,)) for p in plans]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert statuses == ["aborted"] and len(refusals) == 1
    loser = refusals[0]
    winner = next(p.name for p in plans if p.name != loser.plan)
    (run,) = history.list_runs(plan=winner)
    assert loser.other_plan == winner and loser.run_id == run.id
    assert f"plan {winner} (run {run.id})" in str(loser)


def test_a_recover_holds_the_targets_its_run_touched(lab: LabInfo, history: HistoryStore) -> None:
    from drills.plan import load_plan
    from drills.plan.claims import plan_claims
    from drills.takeover.recover import recover_run

    crashed, other = (load_plan(_renamed(lab, n)) for n in ("recover-a", "recover-b"))
    now = dt.datetime.now(dt.UTC)
    run = DrillRun(id="crashed-a", plan=crashed.name, plan_digest="x", mode="drill",
                   operator="t", status="running", started_at=now)  # fmt: skip
    history.create_run(run)
    held = PlanLease(history, other.name, "run-b", claims=plan_claims(other))
    with held, pytest.raises(lease.TargetBusyError) as busy:
        recover_run(history, crashed, run)
    assert busy.value.other_plan == "recover-b" and busy.value.run_id == "run-b"
    assert lease.current(history, crashed.name) is None  # its plan lease given back too


# Started twice at the same instant, as on two hosts: each holds the lease it won for a few
# seconds at the confirmation, then declines (so the shared lab is never changed).
_START_AT = """
import json, sys, time
from drills.errors import DrillError
from drills.plan import load_plan
from drills.store.history import HistoryStore
from drills.takeover.drill import Drill, DrillHooks, DrillRequest

plan_file, db, start_at = sys.argv[1], sys.argv[2], float(sys.argv[3])
history = HistoryStore(db)
request = DrillRequest(load_plan(plan_file), operator="host", tier_deadline_s=20)
hooks = DrillHooks(confirm=lambda _planned: time.sleep(4) or False)
time.sleep(max(0.0, start_at - time.time()))
try:
    print(json.dumps({"status": Drill(request, history, hooks).run().status}))
except DrillError as exc:
    print(json.dumps({"refused": type(exc).__name__, "message": str(exc)}))
"""


def test_two_processes_starting_a_plan_on_postgresql_give_exactly_one_run(
    lab: LabInfo, postgres: PostgresServer
) -> None:
    db = postgres.create_database()
    HistoryStore(db).close()  # the schema made once: the race is for the lease
    start_at = f"{time.time() + 6:.3f}"  # both imported and connected by then
    plan_file = str(Path(lab.state_dir) / "plan.yaml")
    hosts = [
        subprocess.Popen([sys.executable, "-c", _START_AT, plan_file, db, start_at],
                         stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]  # fmt: skip
    outcomes = sorted((json.loads(h.communicate(timeout=120)[0]) for h in hosts), key=str)
    assert [o.get("status") for o in outcomes] == [None, "aborted"], outcomes
    assert outcomes[0]["refused"] == "LeaseHeldError"
    history = HistoryStore(db)
    runs = history.list_runs(plan="lab")
    assert len(runs) == 1 and f"run {runs[0].id} holds its lease" in outcomes[0]["message"]
    assert lease.current(history, "lab") is None
    history.close()
    postgres.drop_database(db)


def test_expiry_is_judged_by_the_database_clock_not_the_host_clock(
    history: HistoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two hosts whose clocks disagree by two minutes agree on a live lease: the store's
    server keeps the one clock, and expiry is written and judged by it."""
    from drills.store.clock import database_now
    from drills.takeover.orphans import orphans

    db_now = database_now(history)
    assert db_now.tzinfo is not None
    assert abs((db_now - dt.datetime.now(dt.UTC)).total_seconds()) < 5
    history.create_run(
        DrillRun(id="alive1", plan="skewed", plan_digest="x", mode="drill", operator="t",
                 status="running", started_at=db_now)
    )  # fmt: skip
    lease.acquire(history, "skewed", "alive1", "otherhost:1:a", lease_s=60)
    held = lease.current(history, "skewed")
    assert held is not None
    assert 55 < (held.expires_at - db_now).total_seconds() < 65
    # This host's clock runs two minutes ahead of the one that took the lease.
    ahead = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=120)
    for module in ("drills.takeover.lease", "drills.takeover.orphans"):
        monkeypatch.setattr(f"{module}.utc_now", lambda: ahead, raising=False)
    assert [r.id for r in orphans(history)] == []  # alive: not recovered from under it
    with pytest.raises(LeaseHeldError):
        lease.acquire(history, "skewed", "recover", "thishost:2:b")
    assert lease.renew(history, "skewed", "otherhost:1:a", lease_s=60)
    renewed = lease.current(history, "skewed")
    assert renewed is not None and renewed.expires_at < ahead  # by the server's clock


def test_a_lease_taken_from_its_holder_calls_on_lost_once_and_says_why(
    history: HistoryStore,
) -> None:
    told: list[str] = []
    held = PlanLease(history, "stolen", "run-a", lease_s=0.6, renew_s=0.1, on_lost=told.append)
    with held:
        with history.session() as s:  # another host's recover took it
            row = s.get(Lease, "stolen")
            assert row is not None
            row.holder = "elsewhere:1:x"
        deadline = time.monotonic() + 5
        while not told and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # no second call
    assert len(told) == 1 and "lost the lease of plan stolen" in told[0], told
    assert held.lost == told[0] and "another holder took it" in told[0]
    row = lease.current(history, "stolen")
    assert row is not None and row.holder == "elsewhere:1:x"
    lease.release(history, "stolen", "elsewhere:1:x")


def test_cancel_run_stops_the_main_thread_as_a_sigterm_does_with_the_reason() -> None:
    from drills.takeover.cancellation import LeaseLost, cancel_on_signals, cancel_run

    with pytest.raises(LeaseLost, match="lost the lease of plan p"), cancel_on_signals():
        cancel_run(threading.get_ident(), "the run lost the lease of plan p: taken")
        time.sleep(10)  # a wait on a lock or a sleep is woken: raised well before this ends
    # Another thread (no signal handler there): raised in it at its next instruction.
    caught: list[BaseException] = []

    def run() -> None:
        try:
            for _ in range(200):
                time.sleep(0.05)
        except LeaseLost as exc:
            caught.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    assert worker.ident is not None
    cancel_run(worker.ident, "the run lost the lease of plan q")
    worker.join(5)
    assert not worker.is_alive() and len(caught) == 1


# A drill whose process dies by SIGKILL at a crash point, holding a short lease.
_CRASHING = """
import sys
from drills.plan import load_plan
from drills.store.history import HistoryStore
from drills.takeover import crashpoints
from drills.takeover.drill import Drill, DrillHooks, DrillRequest

plan_file, db, run_id, lease_s = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
request = DrillRequest(load_plan(plan_file), operator="tests", tier_deadline_s=20,
                       plan_path=plan_file, run_id=run_id, lease_s=lease_s)
Drill(request, HistoryStore(db), DrillHooks(crash_point=crashpoints.point)).run()
"""


@pytest.fixture(scope="module")
def crash_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    with own_lab(tmp_path_factory, "lease-crash-lab", ready_delay=0.1) as info:
        yield info


def _target_rows(history: HistoryStore, run_id: str) -> list[TargetLease]:
    with history.session() as s:
        return list(s.scalars(select(TargetLease).where(TargetLease.run_id == run_id)).all())


def test_a_crashed_run_keeps_its_targets_past_its_lease_until_recovered(
    crash_lab: LabInfo, history: HistoryStore
) -> None:
    crashed_file, second_file = (_renamed(crash_lab, n) for n in ("crash-a", "crash-b"))
    lease_s = 1.0
    died = subprocess.run(
        [sys.executable, "-c", _CRASHING, str(crashed_file), history.url, "crashrun1",
         str(lease_s)],
        env={**os.environ, crashpoints.ENV: "phase:smoke:start"}, timeout=180,
    )  # fmt: skip
    assert died.returncode == -signal.SIGKILL
    run = history.get_run("crashrun1")
    assert run is not None and run.finished_at is None  # DR up, DNS switched, then killed
    time.sleep(lease_s + 0.5)
    held = _target_rows(history, "crashrun1")
    assert held and all(r.expires_at.replace(tzinfo=dt.UTC) < dt.datetime.now(dt.UTC)
                        for r in held)  # fmt: skip
    assert lease.current(history, "crash-a") is not None  # lapsed, never released

    refused = drills_cli("run", str(second_file), "--yes", db=history.url)
    assert refused.returncode == 3, refused.stderr
    words = " ".join(refused.stderr.split())
    assert "run crashrun1 of plan crash-a" in words and "drills recover crashrun1" in words
    assert "crashed or stopped part-way" in words
    assert history.list_runs(plan="crash-b") == []
    with pytest.raises(UnfinishedRunError, match="drills recover crashrun1"):  # its own plan
        Drill(DrillRequest(load_plan(crashed_file), operator="tests"), history).run()

    recovered = drills_cli("recover", "crashrun1", db=history.url)
    assert recovered.returncode == 0, recovered.stderr
    assert _target_rows(history, "crashrun1") == []  # released with the run recovered
    second = drills_cli("run", str(second_file), "--yes", "--tier-deadline", "20",
                        db=history.url)  # fmt: skip
    assert second.returncode == 0, second.stderr
    [run_b] = history.list_runs(plan="crash-b")
    assert run_b.status == "succeeded" and run_b.finished_at is not None
