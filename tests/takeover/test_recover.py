"""`drills recover`: a drill that died is rolled back and verified; an incident that died
is reported, then completed or held. Recovering twice, or after a partial recover, is safe;
two recovers at once go one at a time, the second refused (exit 3) naming the first."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from drills.cli import app
from drills.plan import DrillPlan
from drills.plan.claims import plan_claims
from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus
from drills.store.models import AuditEvent, DrillRun, TargetLease
from drills.takeover.cancellation import DrillCancelled
from drills.takeover.drill import Drill, DrillHooks, DrillRequest
from drills.takeover.journal import Journal
from drills.takeover.lease import UnfinishedRunError, current
from drills.takeover.recover import RecoverError, RecoverStatus, pick_run, plan_of, recover_run
from drills.takeover.snapshot import Snapshot, differences
from drills.takeover.steps.changes import KINDS
from drills.takeover.steps.executor import ChangeExecutor
from drills.targets.sites import Targets
from drills_lab.runtime import LabInfo
from tests.support.drill import back_to_normal, lab_plan, snapshot
from tests.support.services import own_lab


class Crash(BaseException):
    """Stands in for SIGKILL in-process: nothing of the drill's own handling runs."""


@pytest.fixture(scope="module")
def recover_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    with own_lab(tmp_path_factory, "recover-lab", ready_delay=0.1) as info:
        yield info


def only_dr_replicas_grew(before: Snapshot, after: Snapshot) -> bool:
    """Whether the only differences are more replicas at DR."""
    return all(
        address.startswith("dr/")
        and set(change["before"] or ()) == set(change["after"] or ()) == {"replicas"}
        and change["after"]["replicas"] > change["before"]["replicas"]
        for address, change in differences(before, after).items()
    )


def crash_at(info: LabInfo, history: HistoryStore, where: str, mode: Mode = Mode.DRILL) -> str:
    """Run a drill (or incident) that dies at the point ``where``; returns its run id."""
    plan = lab_plan(info)

    def crash_point(name: str) -> None:
        if name == where:
            raise Crash(name)

    request = DrillRequest(
        plan, mode=mode, operator="tests", tier_deadline_s=20,
        plan_path=str(Path(info.state_dir) / "plan.yaml"),
    )  # fmt: skip
    drill = Drill(request, history, DrillHooks(crash_point=crash_point))
    with pytest.raises(Crash):
        drill.run()
    return drill.run_id


def crashed_drill(info: LabInfo, history: HistoryStore) -> tuple[DrillPlan, Snapshot, str]:
    """The lab's plan, its state before, and a drill of it that died just before its smoke
    test (DR up, DNS switched, the primary fenced)."""
    plan = lab_plan(info)
    original = snapshot(plan)
    run_id = crash_at(info, history, "phase:smoke:start")
    assert snapshot(plan) != original
    return plan, original, run_id


def serving(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_recover_rolls_a_crashed_drill_back_twice_and_after_a_partial_recover(
    recover_lab: LabInfo, history: HistoryStore
) -> None:
    plan, original, run_id = crashed_drill(recover_lab, history)
    stored = history.get_run(run_id)
    assert stored is not None and stored.details.snapshot_before == original
    with pytest.raises(UnfinishedRunError):  # nothing new starts on top of it
        Drill(DrillRequest(plan, operator="tests"), history).run()

    # A recover that itself died after switching DNS back, before anything else.
    with Targets(plan) as targets:
        ChangeExecutor(targets, Journal(history, run_id)).rollback(lambda c: c.kind == "dns.record")
    assert snapshot(plan) != original

    run = pick_run(history, None, plan.name)
    assert run.id == run_id
    first = recover_run(history, plan_of(run), run)
    assert first.status == RecoverStatus.RECOVERED, first.error
    assert first.drift == {} and snapshot(plan) == original
    assert "api.drills.test./A" not in first.undone  # already back: no second write
    assert serving(recover_lab.endpoints["primary"]) and not serving(recover_lab.endpoints["dr"])

    again = recover_run(history, plan, history.get_run(run_id))  # type: ignore[arg-type]
    assert again.status == RecoverStatus.RECOVERED and again.undone == []
    assert snapshot(plan) == original
    done = history.get_run(run_id)
    assert done is not None and done.finished_at is not None and done.status == RunStatus.RECOVERED
    assert [a.status for a in done.details.recover] == [RunStatus.RECOVERED] * 2
    assert history.unfinished_runs(plan.name) == []
    with pytest.raises(RecoverError, match="no unfinished run"):
        pick_run(history, None, plan.name)


def test_recover_cli_on_a_drill_that_died_between_journal_and_write(
    recover_lab: LabInfo, history: HistoryStore
) -> None:
    plan = lab_plan(recover_lab)
    original = snapshot(plan)
    run_id = crash_at(recover_lab, history, "dns.record api.drills.test./A journalled")
    # The newest DNS entry: a validation Job started beside the takeover may come after it.
    dns = [c for c in Journal(history, run_id).changes() if c.kind == "dns.record"]
    assert dns[-1].state == "pending"
    db = history.url
    out = CliRunner().invoke(app, ["recover", run_id[:8], "--db", db])
    assert out.exit_code == 0, out.output
    assert "recovered (rollback)" in out.output
    assert snapshot(plan) == original
    assert {c.state for c in Journal(history, run_id).changes()} == {"undone"}
    wrong = CliRunner().invoke(app, ["recover", run_id, "--complete", "--db", db])
    assert wrong.exit_code == 1 and "always rolled back" in wrong.output


def test_a_crashed_incident_is_reported_then_held_or_completed(
    recover_lab: LabInfo, history: HistoryStore
) -> None:
    plan = lab_plan(recover_lab)
    original = snapshot(plan)
    dr_target = "dr/Deployment/serving/llm-server"
    run_id = crash_at(
        recover_lab, history, f"workload.scale {dr_target} journalled", mode=Mode.INCIDENT
    )
    db = history.url
    try:
        report = CliRunner().invoke(app, ["recover", "--plan", plan.name, "--db", db])
        assert report.exit_code == 3 and "--complete" in report.output, report.output
        assert history.unfinished_runs(plan.name)[0].id == run_id  # untouched: a person decides

        held = CliRunner().invoke(app, ["recover", run_id, "--hold", "--json", "--db", db])
        assert held.exit_code == 0, held.output
        assert not serving(recover_lab.endpoints["primary"])  # fenced, verified from outside
        pending = [c for c in Journal(history, run_id).changes() if c.target == dr_target]
        assert pending and pending[0].state == "failed"  # never written: settled, not guessed
        stored = history.get_run(run_id)
        assert stored is not None and stored.status == RunStatus.RECOVERED and stored.finished_at

        done = CliRunner().invoke(app, ["recover", run_id, "--complete", "--db", db])
        assert done.exit_code == 0, done.output
        after = snapshot(plan)
        assert after[dr_target]["replicas"] > 0
        assert after["api.drills.test./A"]["values"] == [str(plan.dns.dr_value)]
        assert serving(recover_lab.endpoints["dr"]) and not serving(
            recover_lab.endpoints["primary"]
        )
        again = CliRunner().invoke(app, ["recover", run_id, "--complete", "--db", db])
        assert again.exit_code == 0, again.output
        # Idempotent but for DR's size: each completion scales DR to the 24 h peak of the
        # demand it reads, a peak that rises while the young lab's day goes on.
        assert only_dr_replicas_grew(after, snapshot(plan))
    finally:
        back_to_normal(plan, history, run_id)
    assert snapshot(plan) == original


def _stored_run(history: HistoryStore, run_id: str, **fields: object) -> None:
    import datetime as dt

    values: dict[str, object] = {
        "id": run_id, "plan": "lab", "plan_digest": "sha256:0", "mode": Mode.DRILL,
        "operator": "tests", "status": RunStatus.RUNNING, "started_at": dt.datetime.now(dt.UTC),
    }  # fmt: skip
    values.update(fields)
    history.create_run(DrillRun(**values))


def test_recover_refuses_a_finished_run_and_a_dry_run(history: HistoryStore) -> None:
    """Their history is the record of what happened: a recover by id must not rewrite it."""
    import datetime as dt

    _stored_run(
        history, "finished-run", status=RunStatus.ROLLED_BACK, finished_at=dt.datetime.now(dt.UTC)
    )
    _stored_run(history, "dry-run-run", dry_run=True, status=RunStatus.DRY_RUN)
    with pytest.raises(RecoverError, match="finished-run finished \\(rolled-back\\)"):
        pick_run(history, "finished-run", None)
    with pytest.raises(RecoverError, match="dry-run-run is a dry run"):
        pick_run(history, "dry-run-run", None)
    out = CliRunner().invoke(app, ["recover", "finished-run", "--db", history.url])
    assert out.exit_code == 1 and "nothing to recover" in out.output, out.output
    stored = history.get_run("finished-run")
    assert stored is not None and stored.status == RunStatus.ROLLED_BACK
    assert stored.details.recover == []


def _forget_snapshot(history: HistoryStore, run_id: str) -> DrillRun:
    """The run as if it kept no snapshot (an incident whose read took too long)."""
    run = history.get_run(run_id)
    assert run is not None
    history.update_run(run_id, details=run.details.model_copy(update={"snapshot_before": None}))
    stored = history.get_run(run_id)
    assert stored is not None and stored.details.snapshot_before is None
    return stored


def test_a_run_without_a_snapshot_is_verified_against_its_journal(
    recover_lab: LabInfo, history: HistoryStore
) -> None:
    """Rolled back and compared with the originals of its journal, every entry counted (the
    undone ones of a first recover too): a target set otherwise by hand since is drift,
    on the second recover as on the first."""
    plan = lab_plan(recover_lab)
    original = snapshot(plan)
    run_id = crash_at(recover_lab, history, "phase:smoke:start")
    first = recover_run(history, plan, _forget_snapshot(history, run_id))
    assert first.status == RecoverStatus.RECOVERED, first.error
    assert first.drift == {} and snapshot(plan) == original
    (compare,) = [s for p in first.timeline.to_json() for s in p["steps"] if "compare" in s["name"]]
    assert compare["evidence"]["against"].startswith("the originals of the journal")

    trainer = "primary/Deployment/training/trainer"  # a writer the fence stopped, and restarted
    assert any(c.target == trainer for c in Journal(history, run_id).changes())
    with Targets(plan) as targets:
        KINDS["workload.scale"].write(targets, trainer, {"replicas": 3})
        try:
            again = recover_run(history, plan, history.get_run(run_id))  # type: ignore[arg-type]
        finally:
            KINDS["workload.scale"].write(targets, trainer, original[trainer])
    assert again.status == RecoverStatus.RECOVER_FAILED
    assert set(again.drift) == {trainer}
    assert snapshot(plan) == original


def test_a_mistaken_incident_without_a_snapshot_is_abandoned_at_once(
    recover_lab: LabInfo, history: HistoryStore
) -> None:
    """--fail-back of an incident that kept no snapshot: verified against its journal and
    closed on the first attempt (not refused once, then closed unchecked the second time)."""
    plan = lab_plan(recover_lab)
    original = snapshot(plan)
    where = "workload.scale dr/Deployment/serving/llm-server written"  # before its DNS switch
    run_id = crash_at(recover_lab, history, where, mode=Mode.INCIDENT)
    report = recover_run(
        history, plan, _forget_snapshot(history, run_id), action="fail-back",
        operator="alice", reason="declared by mistake",
    )  # fmt: skip
    assert report.status == RecoverStatus.RECOVERED, report.error
    assert report.drift == {} and report.undone and snapshot(plan) == original
    stored = history.get_run(run_id)
    assert stored is not None and stored.status == RunStatus.RECOVERED and stored.finished_at
    assert stored.details.incident is not None
    assert stored.details.incident.closed_by == "recover --fail-back"
    with history.session() as s:
        events = s.query(AuditEvent).filter(AuditEvent.action == "recover-fail-back").all()
        assert [(e.who, e.accepted) for e in events] == [("alice", True)]


def test_recover_fail_back_is_refused_once_an_incident_switched_dns(
    recover_lab: LabInfo, history: HistoryStore
) -> None:
    """DR may have taken writes since the switch: --fail-back (no writer stopped, nothing
    synced back) is refused, before and after --complete, naming the way home."""
    plan = lab_plan(recover_lab)
    original = snapshot(plan)
    run_id = crash_at(recover_lab, history, "phase:smoke:start", mode=Mode.INCIDENT)
    db = history.url
    fail_back = ["recover", run_id, "--fail-back", "--operator", "alice", "--reason", "r"]
    try:
        at_dr = snapshot(plan)
        refused = CliRunner().invoke(app, [*fail_back, "--db", db])
        assert refused.exit_code == 3, refused.output
        assert refused.output.strip().count("\n") == 0  # one line
        assert "switched DNS to DR" in refused.output
        assert f"drills recover {run_id} --complete" in refused.output
        assert "--mode failback" in refused.output
        assert snapshot(plan) == at_dr  # nothing undone
        stored = history.get_run(run_id)
        assert stored is not None and stored.details.recover == []
        with history.session() as s:
            (event,) = s.query(AuditEvent).filter(AuditEvent.action == "recover-fail-back").all()
            assert event.who == "alice" and not event.accepted
            assert "switched DNS to DR" in event.detail["refused"]

        done = CliRunner().invoke(app, ["recover", run_id, "--complete", "--db", db])
        assert done.exit_code == 0, done.output
        again = CliRunner().invoke(app, [*fail_back, "--db", db])
        assert again.exit_code == 3 and "--mode failback" in again.output, again.output
        stored = history.get_run(run_id)
        assert stored is not None and stored.status == RunStatus.RECOVERED
        assert stored.details.incident is None or stored.details.incident.closed_at is None
    finally:
        back_to_normal(plan, history, run_id)
    assert snapshot(plan) == original


def test_an_interrupt_during_the_undo_leaves_the_run_for_recover(
    recover_lab: LabInfo, history: HistoryStore
) -> None:
    """A drill cancelled, then interrupted again in the middle of its rollback: the run is
    recorded as left unfinished (not `running` with its lease gone), and recover ends it."""
    plan = lab_plan(recover_lab)
    original = snapshot(plan)
    interrupts = {"phase:smoke:start", "undo dns.record api.drills.test./A written"}

    def interrupt(name: str) -> None:
        if name in interrupts:
            raise DrillCancelled(f"cancelled at {name}")

    request = DrillRequest(plan, operator="tests", tier_deadline_s=20)
    drill = Drill(request, history, DrillHooks(crash_point=interrupt))
    result = drill.run()
    assert result.status == RunStatus.ROLLBACK_FAILED and result.drift is None
    assert "cancelled at phase:smoke:start" in (result.error or "")
    assert "while stopping: interrupted" in (result.error or "")
    assert f"drills recover {drill.run_id}" in (result.error or "")
    stored = history.get_run(drill.run_id)
    assert stored is not None and stored.status == RunStatus.ROLLBACK_FAILED
    assert stored.finished_at is None
    assert [r.id for r in history.unfinished_runs(plan.name)] == [drill.run_id]
    report = recover_run(history, plan, stored)
    assert report.status == RecoverStatus.RECOVERED, report.error
    assert report.drift == {} and snapshot(plan) == original


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
    recover_lab: LabInfo, history: HistoryStore
) -> None:
    plan, original, run_id = crashed_drill(recover_lab, history)
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
