"""Which runs recover-orphans takes: unfinished ones no live lease holder renews."""

from __future__ import annotations

import datetime as dt
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from drills.notify.deliver import subscribe
from drills.notify.events import EventKind, Notice
from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus
from drills.store.models import DrillRun
from drills.takeover import lease
from drills.takeover.orphans import ORPHAN_BOUND_S, orphans, recover_orphan
from drills.takeover.timeline import utc_now
from tests.support.drill import back_to_normal, drills_cli, lab_plan, serving
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
        told: list[Notice] = []
        unsubscribe = subscribe(told.append)
        try:
            outcome = recover_orphan(history, run)
        finally:
            unsubscribe()
        assert (outcome.action, outcome.status) == ("hold", "recovered"), outcome.error
        held = history.get_run(run.id)
        assert held is not None and held.status == RunStatus.RECOVERED
        assert held.details.recover[-1].action == "hold"
        assert not serving(str(plan.sites.primary.endpoint))  # fenced still: no failback
        [notice] = [n for n in told if n.kind == EventKind.RUN_ORPHANED]
        assert notice.payload["run_id"] == run.id and "held at DR" in notice.title
        assert any("never failed back" in line for line in notice.remediation)
        back_to_normal(plan, history, run.id)
