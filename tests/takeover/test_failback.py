"""The way home: incident → hold at DR → failback, on the lab (BIND) and on Route 53; the
data gate with reverse replication off; crashes of a failback on either side of its DNS
switch; a mistaken incident abandoned with `drills recover RUN --fail-back`."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from drills.cli.app import app
from drills.errors import PermanentError
from drills.plan import DrillPlan
from drills.store.history import HistoryStore
from drills.store.incident_record import incident_record
from drills.store.kinds import EntryState
from drills.store.serving import Site, recorded_serving
from drills.takeover.drill import Drill, DrillHooks, DrillRequest, DrillResult
from drills.takeover.failback import Failback, NotServingFromDrError
from drills.takeover.journal import Change, Journal
from drills.takeover.status import serving_status
from drills.takeover.steps.failback import goal_from_journal
from drills.targets.sites import Targets
from drills_lab.runtime import NAMED_DIR, LabInfo
from tests.support.drill import SplitBrainMonitor, drills_cli, lab_plan, snapshot
from tests.support.receivers import json_receiver
from tests.support.services import own_lab

CKPT_DR, CKPT_PRIMARY, PREFIX = "ckpt-dr", "ckpt-primary", "runs/llama-8b/"


@pytest.fixture(scope="module")
def home_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    with own_lab(tmp_path_factory, "failback-lab", ready_delay=0.2) as info:
        yield info


def s3(info: LabInfo) -> Any:
    creds = Path(info.state_dir) / "aws"
    return boto3.client(
        "s3", endpoint_url=info.moto, region_name="us-west-2",
        aws_access_key_id=(creds / "access_key_id").read_text().strip(),
        aws_secret_access_key=(creds / "secret_access_key").read_text().strip(),
    )  # fmt: skip


def run(plan: DrillPlan, history: HistoryStore, mode: str, **kwargs: Any) -> DrillResult:
    request = DrillRequest(plan, mode=mode, operator="tests", reason="ci", tier_deadline_s=20,
                           sync_deadline_s=5, **kwargs)  # fmt: skip
    runner = Failback if mode == "failback" else Drill
    return runner(request, history).run()


def incident_then_write_at_dr(info: LabInfo, plan: DrillPlan, history: HistoryStore) -> str:
    result = run(plan, history, "incident")
    assert result.status == "succeeded", result.error
    assert recorded_serving(history, plan.name).site == Site.DR
    key = f"{PREFIX}by-hand-{result.run_id}.bin"
    s3(info).put_object(Bucket=CKPT_DR, Key=key, Body=b"written while DR served")
    return key


def decline_failback(info: LabInfo, history: HistoryStore) -> None:
    """`drills run --mode failback` answered no: the way back was listed, then nothing was
    changed and no failback recorded; the plan still serves from DR."""
    at_dr = snapshot(lab_plan(info))
    runs = [r.id for r in history.list_runs()]
    plan_file = str(Path(info.state_dir) / "plan.yaml")
    declined = CliRunner().invoke(
        app, ["run", plan_file, "--mode", "failback", "--db", history.url], input="n\n"
    )
    assert declined.exit_code == 4, declined.output
    assert "dns.record api.drills.test./A" in declined.output  # the way back, asked about
    assert [r.id for r in history.list_runs()] == runs
    assert snapshot(lab_plan(info)) == at_dr


def full_cycle(info: LabInfo, history: HistoryStore, *, decline_first: bool = False) -> None:
    plan = lab_plan(info)
    before = snapshot(plan)
    key = incident_then_write_at_dr(info, plan, history)
    if decline_first:
        decline_failback(info, history)
    with SplitBrainMonitor(info.endpoints["primary"], info.endpoints["dr"]) as monitor:
        result = run(plan, history, "failback")
    assert result.status == "succeeded", result.error
    assert result.drift == {}
    assert snapshot(plan) == before  # the Kubernetes state (and DNS) before the incident
    body = s3(info).get_object(Bucket=CKPT_PRIMARY, Key=key)["Body"].read()
    assert body == b"written while DR served"
    status = serving_status(plan, history)
    assert status.site == Site.PRIMARY and status.disagreement is None
    assert status.live is not None and status.live.dns == "primary"
    stored = history.get_run(result.run_id)
    assert stored is not None and stored.details.failback is not None
    assert stored.details.failback.downtime_seconds is not None
    assert stored.details.failback.downtime_seconds > 0
    record = incident_record(stored, history)
    assert record is not None and not record["open"] and record["closed_by"] == "failback"
    assert record["written_at_dr"] >= 1 and record["copied_back"] == record["written_at_dr"]
    assert record["served_from_dr_seconds"] > 0
    # DR serves while the primary comes up (its writers stopped), so only the sites'
    # order is checked here: DR was seen serving, then the primary.
    assert monitor.seen["primary"] > 0 and monitor.seen["dr"] > 0


def test_incident_then_failback_returns_to_the_state_before(
    home_lab: LabInfo, history: HistoryStore
) -> None:
    full_cycle(home_lab, history, decline_first=True)


def test_incident_then_failback_on_route53(
    tmp_path_factory: pytest.TempPathFactory, history: HistoryStore
) -> None:
    with own_lab(tmp_path_factory, "failback-r53", ready_delay=0.2, system_services=False) as info:
        assert lab_plan(info).dns.provider == "route53"
        full_cycle(info, history)


def test_failback_is_refused_while_the_primary_serves(
    home_lab: LabInfo, history: HistoryStore
) -> None:
    with pytest.raises(NotServingFromDrError, match="does not serve from DR"):
        run(lab_plan(home_lab), history, "failback")
    assert history.list_runs() == []  # refused before anything was recorded


def test_failback_refuses_before_any_change_without_reverse_replication(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    with own_lab(
        tmp_path_factory, "no-reverse", ready_delay=0.2, reverse_replication=False
    ) as info:
        db = f"sqlite:///{tmp_path / 'h.db'}"
        plan_file = str(Path(info.state_dir) / "plan.yaml")
        assert drills_cli("run", plan_file, "--mode", "incident", "--yes", db=db).returncode == 0
        s3(info).put_object(Bucket=CKPT_DR, Key=f"{PREFIX}stuck.bin", Body=b"only at DR")
        before = snapshot(lab_plan(info))
        failed = drills_cli("run", plan_file, "--mode", "failback", "--yes", "--json", db=db)
        assert failed.returncode == 1
        report = json.loads(failed.stdout[failed.stdout.index("{") :])
        assert report["run"]["status"] == "aborted"
        assert (
            "data.caught_up" in report["run"]["error"] and "checkpoints" in report["run"]["error"]
        )
        assert report["journal"] == []
        assert snapshot(lab_plan(info)) == before
        status = json.loads(drills_cli("status", plan_file, "--json", db=db).stdout)
        assert status["serving"] == "dr" and status["agrees"]
        # A takeover starts from the primary: at DR, a drill or a second incident is refused.
        for mode in ("drill", "incident"):
            again = drills_cli("run", plan_file, "--mode", mode, "--yes", db=db)
            assert again.returncode == 3, again.stderr
            assert "already serves from DR" in again.stderr and "failback" in again.stderr
        assert snapshot(lab_plan(info)) == before


@pytest.mark.parametrize(
    ("crash_at", "ends"),
    [
        ("workload.scale primary/Deployment/training/trainer written", "dr"),
        ("dns.record api.drills.test./A written", "primary"),
    ],
)
def test_a_crashed_failback_recovers_on_its_side_of_the_dns_switch(
    home_lab: LabInfo, tmp_path: Path, crash_at: str, ends: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    plan_file = str(Path(home_lab.state_dir) / "plan.yaml")
    plan = lab_plan(home_lab)
    before_incident = snapshot(plan)
    assert drills_cli("run", plan_file, "--mode", "incident", "--yes", db=db).returncode == 0
    serving_dr = snapshot(plan)
    crashed = drills_cli("run", plan_file, "--mode", "failback", "--yes", db=db, crash_at=crash_at)
    assert crashed.returncode != 0
    status = json.loads(drills_cli("status", plan_file, "--json", "--no-live", db=db).stdout)
    assert status["serving"] == "in-transition" and status["holding_run"]
    with json_receiver() as hook:
        monkeypatch.setenv("DRILLS_NOTIFY", hook.url())
        recovered = drills_cli("recover", "--plan", "lab", "--json", db=db)
        monkeypatch.delenv("DRILLS_NOTIFY")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert json.loads(recovered.stdout)["action"] == (
        "complete" if ends == "primary" else "rollback"
    )
    closed = [m for m in hook.messages() if " closed (failback)" in m["title"]]
    failback = next(r for r in HistoryStore(db).list_runs() if r.mode == "failback")
    link = failback.details.incident
    assert link is not None and link.incident_run
    if ends == "primary":  # completed by recover: closed as a failback that ends closes it
        assert link.closed_at is not None and link.closed_by == "failback"
        assert len(closed) == 1 and link.incident_run in closed[0]["title"], closed
    else:
        assert link.closed_at is None and closed == []
    assert snapshot(plan) == (before_incident if ends == "primary" else serving_dr)
    status = json.loads(drills_cli("status", plan_file, "--json", db=db).stdout)
    assert status["serving"] == ends and status["agrees"], status
    table = drills_cli("status", plan_file, "--no-live", db=db).stdout
    assert "unfinished runs │ —" in table and "holding run     │ —" in table, table
    if ends == "dr":  # leave the lab at the primary for the next test
        assert drills_cli("run", plan_file, "--mode", "failback", "--yes", db=db).returncode == 0
        assert snapshot(plan) == before_incident


def _server_key(info: LabInfo, secret: str | None = None) -> str:
    """The lab's BIND key secret, as it stands; with ``secret``, rotated to it (the server
    reloads its config on SIGHUP, the zone and its journal kept)."""
    conf = Path(info.state_dir) / NAMED_DIR / "named.conf"
    text = conf.read_text()
    current = re.search(r'secret "([^"]+)";', text)
    assert current is not None
    if secret is not None:
        conf.write_text(text.replace(current.group(1), secret))
        pid = int((conf.parent / "named.pid").read_text())
        os.kill(pid, signal.SIGHUP)
    return current.group(1)


def _key_works(plan: DrillPlan) -> bool:
    dns = plan.dns
    with Targets(plan) as targets:
        try:
            targets.dns.check_control(dns.record.name, str(dns.record.type))
        except PermanentError:
            return False
    return True


def _wait_key(plan: DrillPlan, *, works: bool) -> None:
    deadline = time.monotonic() + 15
    while _key_works(plan) != works:
        assert time.monotonic() < deadline, (
            f"the lab's DNS key did not {'' if works else 'stop '}work"
        )
        time.sleep(0.2)


def test_a_failback_whose_dns_switch_is_refused_serves_from_dr_as_before(
    home_lab: LabInfo, history: HistoryStore
) -> None:
    """The server stops taking the failback's key once its preflight passed: the switch
    is refused and the record still answers DR. Nothing switched, so the failback is
    undone (not completed forward, which would fail at the same switch with the primary
    reopened and DR's writers stopped), and a failback after it brings production home."""
    plan = lab_plan(home_lab)
    before_incident = snapshot(plan)
    incident_then_write_at_dr(home_lab, plan, history)
    serving_dr = snapshot(plan)
    original_key = _server_key(home_lab)

    def rotate_at_the_switch(name: str) -> None:
        if name == "phase:dns back:start":
            _server_key(home_lab, base64.b64encode(os.urandom(32)).decode())
            _wait_key(plan, works=False)

    request = DrillRequest(plan, mode="failback", operator="tests", reason="ci",
                           tier_deadline_s=20, sync_deadline_s=5)  # fmt: skip
    try:
        result = Failback(request, history, DrillHooks(crash_point=rotate_at_the_switch)).run()
    finally:
        _server_key(home_lab, original_key)
        _wait_key(plan, works=True)
    assert result.status == "rolled-back", result.error
    assert "BADSIG" in (result.error or ""), result.error
    assert result.drift == {}
    assert snapshot(plan) == serving_dr
    (switch,) = [c for c in Journal(history, result.run_id).changes() if c.kind == "dns.record"]
    assert switch.state == EntryState.FAILED
    stored = history.get_run(result.run_id)
    assert stored is not None and stored.finished_at is not None  # nothing left to recover
    assert recorded_serving(history, plan.name).site == Site.DR
    again = run(plan, history, "failback")
    assert again.status == "succeeded", again.error
    assert snapshot(plan) == before_incident


def test_a_mistaken_incident_is_abandoned_with_recover_fail_back(
    home_lab: LabInfo, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    plan_file = str(Path(home_lab.state_dir) / "plan.yaml")
    plan = lab_plan(home_lab)
    before = snapshot(plan)
    crash_at = "workload.scale dr/Deployment/serving/llm-server written"
    crashed = drills_cli("run", plan_file, "--mode", "incident", "--yes", db=db, crash_at=crash_at)
    assert crashed.returncode != 0
    refused = drills_cli("recover", "--plan", "lab", "--fail-back", "--reason", "", db=db)
    assert refused.returncode == 1 and "--reason" in refused.stderr
    done = drills_cli(
        "recover", "--plan", "lab", "--fail-back", "--operator", "alice", "--reason",
        "declared by mistake", "--json", db=db,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout)
    assert out["action"] == "fail-back" and out["drift"] == {} and out["undone"]
    assert snapshot(plan) == before
    history = HistoryStore(db)
    (incident,) = history.list_runs()
    assert all(e.state != EntryState.APPLIED for e in history.journal(incident.id))
    assert incident.details.incident is not None
    assert incident.details.incident.closed_by == "recover --fail-back"
    with history.session() as s:
        from drills.store.models import AuditEvent

        (event,) = s.query(AuditEvent).filter(AuditEvent.action == "recover-fail-back").all()
        assert event.who == "alice" and event.accepted and event.reason == "declared by mistake"
    assert recorded_serving(history, "lab").site == Site.PRIMARY
    runs = json.loads(drills_cli("history", "--json", db=db).stdout)
    assert runs[0]["closed_at"] is not None


def test_the_status_json_keys_are_a_stable_interface(history: HistoryStore, tmp_path: Path) -> None:
    from drills.plan import load_plan
    from drills.takeover.status import STATUS_KEYS
    from tests.support.drill import offline_lab_plan_text

    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(offline_lab_plan_text())
    data = serving_status(load_plan(plan_file), history, live=False).to_json()
    assert tuple(data) == STATUS_KEYS == (
        "plan", "serving", "since", "run_id", "incident_id", "incident_t0", "holding_run",
        "lease_run_id", "unfinished_runs", "live", "agrees", "disagreement", "checked_at",
        "unconfirmed",
    )  # fmt: skip
    # Not asked (--no-live): nothing agrees or disagrees.
    assert data["serving"] == "primary" and data["live"] is None and data["agrees"] is None


def test_the_goal_from_a_journal_keeps_each_targets_first_original() -> None:
    """An incident held (DR's trainer scaled up), touched, then completed: the trainer was
    changed twice, and only its first original is the state before the incident."""
    trainer = "dr/Deployment/training/trainer"
    changes = [  # in the order of the journal
        Change(1, "workload.scale", trainer, {"replicas": 0}, {"replicas": 2}, EntryState.APPLIED),
        Change(2, "dns.record", "api.drills.test./A", {"values": ["10.0.0.1"]},
               {"values": ["10.0.0.2"]}, EntryState.APPLIED),
        Change(3, "workload.scale", trainer, {"replicas": 2}, {"replicas": 0}, EntryState.APPLIED),
    ]  # fmt: skip
    now = {trainer: {"replicas": 5}, "other": {"replicas": 1}}
    assert goal_from_journal(now, changes) == {
        trainer: {"replicas": 0},
        "api.drills.test./A": {"values": ["10.0.0.1"]},
        "other": {"replicas": 1},
    }
