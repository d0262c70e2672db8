"""Which runs recover-orphans takes: unfinished ones no live lease holder renews."""

from __future__ import annotations

import datetime as dt
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from drills.errors import StepFailed
from drills.notify.deliver import subscribe
from drills.notify.events import EventKind, Notice
from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus
from drills.store.models import DrillRun, Lease
from drills.takeover import lease
from drills.takeover.drill import Drill, DrillHooks, DrillRequest
from drills.takeover.orphans import ORPHAN_BOUND_S, OrphanOutcome, orphans, recover_orphan
from drills.takeover.timeline import utc_now
from drills_lab.runtime import LabInfo
from tests.support.drill import (
    back_to_normal,
    drills_cli,
    lab_plan,
    lab_plan_file,
    serving,
    snapshot,
)
from tests.support.services import own_lab


def add_run(history: HistoryStore, run_id: str, plan: str, **fields: object) -> None:
    values: dict[str, object] = dict(
        id=run_id, plan=plan, plan_digest="x", mode=Mode.DRILL, operator="t",
        status=RunStatus.RUNNING, started_at=utc_now(),
    )  # fmt: skip
    values.update(fields)
    history.create_run(DrillRun(**values))


def dead_holder() -> str:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return f"{socket.gethostname()}:{child.pid}:x"


def test_only_runs_without_a_live_lease_are_orphans(history: HistoryStore) -> None:
    now = utc_now()
    add_run(history, "alive", "p-alive")
    lease.acquire(history, "p-alive", "alive", "otherhost:1:a", lease_s=60)
    add_run(history, "expired", "p-expired")
    lease.acquire(history, "p-expired", "expired", "otherhost:2:b", lease_s=60)
    add_run(history, "dead", "p-dead")
    lease.acquire(history, "p-dead", "dead", dead_holder(), lease_s=60)
    add_run(history, "no-lease", "p-none")
    add_run(history, "finished", "p-done", finished_at=now, status=RunStatus.SUCCEEDED)
    add_run(history, "dry", "p-dry", dry_run=True)
    # Another run's live lease on the plan (a recover at work) keeps it off too.
    add_run(history, "busy", "p-busy")
    lease.acquire(history, "p-busy", "recovering", "otherhost:3:c", lease_s=60)
    later = now + dt.timedelta(seconds=61)  # the expired one's 60 s are over; renewals aside
    lease.renew(history, "p-alive", "otherhost:1:a", lease_s=120)
    lease.renew(history, "p-busy", "otherhost:3:c", lease_s=120)
    assert {r.id for r in orphans(history, later)} == {"expired", "dead", "no-lease"}
    assert {r.id for r in orphans(history, now)} == {"dead", "no-lease"}
    assert ORPHAN_BOUND_S == 2 * lease.LEASE_S


def test_an_orphan_whose_plan_file_is_gone_is_reported_not_raised(history: HistoryStore) -> None:
    add_run(history, "lost", "p", details={"plan_path": "/nonexistent/plan.yaml"})
    outcome = recover_orphan(history, orphans(history)[0])
    assert (outcome.action, outcome.status) == ("rollback", "recover-failed")
    assert outcome.error and "plan.yaml" in outcome.error
    run = history.get_run("lost")
    assert run is not None and run.finished_at is None  # the next scan tries again


def test_an_orphaned_incident_is_held_never_failed_back_and_people_are_told(
    tmp_path_factory: pytest.TempPathFactory, history: HistoryStore
) -> None:
    with own_lab(tmp_path_factory, "orphan-incident-lab", ready_delay=0.2) as lab:
        plan = lab_plan(lab)
        plan_file = str(Path(lab.state_dir) / "plan.yaml")
        # The takeover's process dies once the primary is fenced, as bring-up begins.
        died = drills_cli("run", plan_file, "--mode", "incident", "--yes", db=history.url,
                          crash_at="phase:bring-up:start")  # fmt: skip
        assert died.returncode != 0
        [run] = orphans(history)  # its holder is a dead process of this host
        outcome, told = scanned(history, run.id)
        assert (outcome.action, outcome.status) == ("hold", "recovered"), outcome.error
        held = history.get_run(run.id)
        assert held is not None and held.status == RunStatus.RECOVERED
        assert held.details.recover[-1].action == "hold"
        assert not serving(str(plan.sites.primary.endpoint))  # fenced still: no failback
        [notice] = told
        assert notice.payload["run_id"] == run.id and "held at DR" in notice.title
        assert any("never failed back" in line for line in notice.remediation)
        back_to_normal(plan, history, run.id)


@pytest.fixture(scope="module")
def orphan_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    """A lab these tests change (each puts it back as it found it)."""
    with own_lab(tmp_path_factory, "orphan-lab", ready_delay=0.2) as info:
        yield info


@pytest.fixture
def store(tmp_path: Path) -> Iterator[HistoryStore]:
    """A history of the test's own (SQLite): the lab tests here are slow enough once."""
    history = HistoryStore(f"sqlite:///{tmp_path / 'h.db'}")
    yield history
    history.close()


def scanned(history: HistoryStore, run_id: str) -> tuple[OrphanOutcome, list[Notice]]:
    """The run as the recover-orphans scan finds it and what it tells people."""
    [run] = [r for r in orphans(history) if r.id == run_id]
    told: list[Notice] = []
    unsubscribe = subscribe(told.append)
    try:
        outcome = recover_orphan(history, run)
    finally:
        unsubscribe()
    return outcome, [n for n in told if n.kind == EventKind.RUN_ORPHANED]


@pytest.mark.parametrize(
    ("crash_at", "ends"),
    [
        ("workload.scale primary/Deployment/training/trainer written", "dr"),  # bring up primary
        ("dns.record api.drills.test./A written", "primary"),
    ],
)
def test_a_failback_whose_worker_died_is_recovered_by_the_scan_on_its_side_of_the_switch(
    orphan_lab: LabInfo, store: HistoryStore, crash_at: str, ends: str
) -> None:
    history = store
    plan_file = str(Path(orphan_lab.state_dir) / "plan.yaml")
    plan = lab_plan(orphan_lab)
    before_incident = snapshot(plan)
    declared = drills_cli("run", plan_file, "--mode", "incident", "--yes", db=history.url)
    assert declared.returncode == 0, declared.stderr
    serving_dr = snapshot(plan)
    died = drills_cli("run", plan_file, "--mode", "failback", "--yes", db=history.url,
                      crash_at=crash_at)  # fmt: skip
    assert died.returncode != 0
    failback = history.list_runs(plan=plan.name)[0]
    assert failback.mode == Mode.FAILBACK and failback.finished_at is None
    outcome, told = scanned(history, failback.id)
    wanted = "complete" if ends == "primary" else "rollback"
    assert (outcome.action, outcome.status) == (wanted, "recovered"), outcome.error
    assert snapshot(plan) == (before_incident if ends == "primary" else serving_dr)
    [notice] = told
    assert notice.payload["run_id"] == failback.id and "failback" in notice.title
    assert ("completed" if ends == "primary" else "undone") in notice.title
    assert orphans(history) == []
    if ends == "dr":  # leave the lab at the primary for the next test
        home = drills_cli("run", plan_file, "--mode", "failback", "--yes", db=history.url)
        assert home.returncode == 0, home.stderr
        assert snapshot(plan) == before_incident


def test_an_incident_left_part_way_for_a_person_is_not_taken_by_the_scan(
    orphan_lab: LabInfo, store: HistoryStore
) -> None:
    history = store
    plan = lab_plan(orphan_lab)

    def fail_at_bring_up(moment: str) -> None:
        if moment == "phase:bring-up:start":
            raise StepFailed("bring-up", "DR cannot come up (made to fail by the test)")

    request = DrillRequest(plan, mode=Mode.INCIDENT, operator="t", reason="ci",
                           plan_path=str(Path(orphan_lab.state_dir) / "plan.yaml"))  # fmt: skip
    result = Drill(request, history, DrillHooks(crash_point=fail_at_bring_up)).run()
    assert result.status == RunStatus.FAILED and "part-way" in (result.error or "")
    run = history.get_run(result.run_id)
    assert run is not None and run.finished_at is None and run.details.left_for_decision
    # Held and announced as stuck, but a refusal, not a deadline: nothing retries it.
    assert run.details.stuck is not None and not run.details.stuck.auto_retry
    assert lease.current(history, plan.name) is None  # its process let go of the lease ...
    assert orphans(history) == []  # ... but it waits for a person, not for the scan
    back_to_normal(plan, history, run.id)


def test_a_force_unfenced_incident_is_held_so_and_people_are_told_once_per_outcome(
    orphan_lab: LabInfo, store: HistoryStore
) -> None:
    """Its primary never answers: a hold that insists on a fence seen from outside fails
    at every scan; each scan's failure is one notice, not one a minute."""
    history = store

    def unreachable_primary(data: dict[str, Any]) -> None:
        data["sites"]["primary"]["endpoint"] = "http://127.0.0.2:9"  # nothing answers there

    plan_file = lab_plan_file(orphan_lab, unreachable_primary)
    plan = lab_plan(orphan_lab, unreachable_primary)
    add_run(history, "unfenced1", plan.name, mode=Mode.INCIDENT,
            details={"plan_path": str(plan_file)})  # fmt: skip
    first, told = scanned(history, "unfenced1")
    assert (first.action, first.status) == ("hold", "recover-failed")
    assert first.error and "--force-unfenced" in first.error
    assert len(told) == 1
    again, told = scanned(history, "unfenced1")  # the next scan: the same outcome
    assert again.status == "recover-failed" and told == []
    # Declared with --force-unfenced: the hold goes on unfenced too, as the incident did.
    run = history.get_run("unfenced1")
    assert run is not None
    history.update_run("unfenced1", details=run.details.model_copy(update={"force_unfenced": True}))
    held, told = scanned(history, "unfenced1")
    assert (held.action, held.status) == ("hold", "recovered"), held.error
    [notice] = told
    assert "held at DR" in notice.title
    stored = history.get_run("unfenced1")
    assert stored is not None and stored.status == RunStatus.RECOVERED
    back_to_normal(plan, history, "unfenced1")


def test_a_drill_whose_lease_is_taken_mid_run_stops_and_rolls_back(
    orphan_lab: LabInfo, store: HistoryStore
) -> None:
    history = store
    plan = lab_plan(orphan_lab)
    before = snapshot(plan)

    def steal_then_wait(moment: str) -> None:
        if moment != "phase:bring-up:start":
            return
        with history.session() as s:  # as another host's recover taking it
            row = s.get(Lease, plan.name)
            assert row is not None
            row.holder = "elsewhere:1:x"
        for _ in range(200):  # the run would go on here; the lost lease stops it
            time.sleep(0.05)

    request = DrillRequest(plan, operator="t", lease_s=1.5, tier_deadline_s=20)
    result = Drill(request, history, DrillHooks(crash_point=steal_then_wait)).run()
    assert result.status == RunStatus.CANCELLED, result.error
    assert "lease" in (result.error or "")
    assert result.drift == {} and snapshot(plan) == before
    run = history.get_run(result.run_id)
    assert run is not None and run.finished_at is not None
    lease.release(history, plan.name, "elsewhere:1:x")
