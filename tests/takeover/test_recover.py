"""`drills recover`: a drill that died is rolled back and verified; an incident that died
is reported, then completed or held. Recovering twice, or after a partial recover, is safe."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from drills.cli import app
from drills.lab.runtime import LabInfo
from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus
from drills.takeover.drill import Drill, DrillHooks, DrillRequest
from drills.takeover.journal import Journal
from drills.takeover.lease import UnfinishedRunError
from drills.takeover.recover import RecoverError, RecoverStatus, pick_run, plan_of, recover
from drills.takeover.steps.executor import ChangeExecutor
from drills.targets.sites import Targets
from tests.support.drill import back_to_normal, lab_plan, snapshot
from tests.support.services import own_lab


class Crash(BaseException):
    """Stands in for SIGKILL in-process: nothing of the drill's own handling runs."""


@pytest.fixture(scope="module")
def recover_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    with own_lab(tmp_path_factory, "recover-lab", ready_delay=0.1) as info:
        yield info


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


def serving(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_recover_rolls_a_crashed_drill_back_twice_and_after_a_partial_recover(
    recover_lab: LabInfo, history: HistoryStore
) -> None:
    plan = lab_plan(recover_lab)
    original = snapshot(plan)
    run_id = crash_at(recover_lab, history, "phase:smoke:start")
    assert snapshot(plan) != original  # DR up, DNS switched, primary fenced
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
    first = recover(history, plan_of(run), run)
    assert first.status == RecoverStatus.RECOVERED, first.error
    assert first.drift == {} and snapshot(plan) == original
    assert "api.drills.test./A" not in first.undone  # already back: no second write
    assert serving(recover_lab.endpoints["primary"]) and not serving(recover_lab.endpoints["dr"])

    again = recover(history, plan, history.get_run(run_id))  # type: ignore[arg-type]
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
    assert Journal(history, run_id).changes()[-1].state == "pending"
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
        assert again.exit_code == 0 and snapshot(plan) == after  # idempotent
    finally:
        back_to_normal(plan, history, run_id)
    assert snapshot(plan) == original


def _stored_run(history: HistoryStore, run_id: str, **fields: object) -> None:
    import datetime as dt

    from drills.store.models import DrillRun

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


def test_recover_of_a_drill_with_changes_but_no_snapshot_is_not_recovered(
    recover_lab: LabInfo, history: HistoryStore
) -> None:
    """Whether the run changed anything is read from its journal as the crash left it, not
    after the rollback (when nothing needs undoing any more)."""
    plan = lab_plan(recover_lab)
    original = snapshot(plan)
    run_id = crash_at(recover_lab, history, "phase:smoke:start")
    run = history.get_run(run_id)
    assert run is not None
    history.update_run(run_id, details=run.details.model_copy(update={"snapshot_before": None}))
    report = recover(history, plan, history.get_run(run_id))  # type: ignore[arg-type]
    assert report.status == RecoverStatus.RECOVER_FAILED
    assert "has changes but no snapshot" in (report.error or "")
    assert snapshot(plan) == original  # rolled back all the same
    stored = history.get_run(run_id)
    assert stored is not None and stored.finished_at is None
    assert stored.status == RunStatus.RECOVER_FAILED
