"""The takeover drill on the lab: the happy path, incident mode, dry run, and a failure in
each phase that must leave the systems exactly as they were."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from drills import timefmt
from drills.plan import DrillPlan
from drills.store.history import HistoryStore
from drills.takeover.drill import Approval, Drill, DrillHooks, DrillRequest, DrillResult
from drills_lab import topology
from drills_lab.runtime import LabInfo
from tests.support.cli import drills_process
from tests.support.drill import SplitBrainMonitor, drills_cli, lab_plan, snapshot
from tests.support.postgres import PostgresServer
from tests.support.services import own_lab

SUCCEEDED_PHASES = [
    "preflight", "declare", "fence", "bring-up", "dns", "smoke", "full-capacity",
    "validation jobs", "measure",
    "failback", "verify failback",
]  # fmt: skip


@pytest.fixture(scope="module")
def drill_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    """A lab of its own: drills change it (and must put it back)."""
    with own_lab(tmp_path_factory, "drill-lab", ready_delay=0.3) as info:
        yield info


@pytest.fixture()
def db_url(tmp_path: Path) -> str:
    """SQLite only here: a drill's behaviour does not depend on the store, whose own tests
    (store, journal, lease, recover, queries) run on both; each full drill runs once."""
    return f"sqlite:///{tmp_path / 'history.db'}"


def drill(plan: DrillPlan, history: HistoryStore, **kwargs: Any) -> DrillResult:
    hooks = kwargs.pop("hooks", None)
    kwargs.setdefault("tier_deadline_s", 20)
    request = DrillRequest(plan, operator="tests", reason="ci", **kwargs)
    return Drill(request, history, hooks).run()


def phase_names(result: DrillResult) -> list[str]:
    return [p.name for p in result.timeline.phases]


def test_full_drill_fails_back_exactly_and_never_splits_brain(
    drill_lab: LabInfo, history: HistoryStore
) -> None:
    plan = lab_plan(drill_lab)
    before = snapshot(plan)
    with SplitBrainMonitor(drill_lab.endpoints["primary"], drill_lab.endpoints["dr"]) as monitor:
        result = drill(plan, history)
    assert result.status == "succeeded", result.error
    assert result.verdict == "met"
    assert phase_names(result) == SUCCEEDED_PHASES
    assert snapshot(plan) == before
    assert result.drift == {}
    m = result.measurement
    assert m is not None and 0 < m.rto_seconds < m.client_rto_seconds
    assert m.rto_seconds < m.full_capacity_seconds
    assert m.client_rto_seconds >= topology.GOOD_TTL  # clients may hold the old answer a TTL
    assert set(m.rpo_seconds) == {d.name for d in topology.DATASETS}
    # The monitor watched the switch happen, and never saw both sites serve.
    assert monitor.seen["primary"] > 0 and monitor.seen["dr"] > 0, monitor.seen
    assert monitor.both == []
    stored = history.get_run(result.run_id)
    assert stored is not None and stored.status == "succeeded" and stored.finished_at
    assert [p["name"] for p in stored.timeline] == SUCCEEDED_PHASES
    assert stored.readiness["results"]
    batch = [
        s for p in stored.timeline for s in p["steps"] if s["name"] == "batch tier stays paused"
    ]
    assert batch and len(batch[0]["evidence"]["paused"]) == 4
    _assert_minimum_takeover_order(stored.timeline, m.rto_seconds, m.full_capacity_seconds)


def _when(phase: dict[str, Any], prefix: str, end: str = "ended_at") -> list[dt.datetime]:
    steps = [s for s in phase["steps"] if s["name"].startswith(prefix)]
    assert steps, f"no step {prefix!r} in {phase['name']}"
    return [dt.datetime.fromisoformat(s[end]) for s in steps]


def _assert_minimum_takeover_order(
    timeline: list[dict[str, Any]], rto: float, full_capacity: float
) -> None:
    """From the stored timeline: DNS switched and the service smoke-tested before the
    normal tier was even scaled, and full capacity measurably after the RTO (the lab's
    rollout delay at least)."""
    phases = {p["name"]: p for p in timeline}
    critical_ready = max(_when(phases["bring-up"], "critical: "))
    dns_confirmed = max(_when(phases["dns"], "confirm on every authoritative server"))
    smoked = max(_when(phases["smoke"], "smoke "))
    normal_started = min(_when(phases["full-capacity"], "normal: ", end="started_at"))
    normal_ready = max(_when(phases["full-capacity"], "normal: "))
    assert critical_ready <= dns_confirmed <= smoked <= normal_started < normal_ready
    assert full_capacity - rto >= 0.25, (rto, full_capacity)
    paused = _when(phases["full-capacity"], "batch tier stays paused")
    assert paused and min(paused) >= normal_ready


def test_dry_run_changes_nothing(drill_lab: LabInfo, history: HistoryStore) -> None:
    plan = lab_plan(drill_lab)
    before = snapshot(plan)
    result = drill(plan, history, dry_run=True)
    assert result.status == "dry-run"
    assert snapshot(plan) == before
    described = [p.describe() for p in result.planned]
    assert any("ingress.class primary/serving/public" in d for d in described)
    assert any("dns.record api.drills.test./A" in d and "127.0.0.3" in d for d in described)
    writers = [w for w in topology.WORKLOADS if w.writer]
    scaled_down = [
        p
        for p in result.planned
        if p.target.startswith("primary/") and p.intended == {"replicas": 0}
    ]
    assert len(scaled_down) == len(writers)
    assert all(p.current != p.intended for p in result.planned)
    # Listed in the order they would be made: the normal tier after the DNS switch.
    targets = [p.target for p in result.planned]
    dns = targets.index("api.drills.test./A")
    normal = [w for w in topology.WORKLOADS if w.tier == "normal" and w.dr_replicas]
    first_normal = min(targets.index(f"dr/{w.kind}/{w.namespace}/{w.name}") for w in normal)
    critical = [w for w in topology.WORKLOADS if w.tier == "critical"]
    last_critical = max(targets.index(f"dr/{w.kind}/{w.namespace}/{w.name}") for w in critical)
    assert last_critical < dns < first_normal
    _says_would(history, result.run_id)


def _says_would(history: HistoryStore, run_id: str) -> None:
    """A dry run's steps changed nothing, so none of them reads as done: each says *would*,
    in the stored timeline and in the report (never "`ok` close primary ingress")."""
    from drills.store.report import render_markdown, report_data

    run = history.get_run(run_id)
    assert run is not None
    (dry,) = [p for p in run.timeline if p["name"] == "dry-run"]
    statuses = {s["name"]: s["status"] for s in dry["steps"]}
    # "skipped" is as true in a dry run as in a real one; "ok" would claim it was done.
    assert statuses and set(statuses.values()) <= {"would", "skipped"}, statuses
    assert statuses["close primary ingress"] == statuses["stop primary writers"] == "would"
    report = render_markdown(report_data(run, history))
    assert "`would` close primary ingress" in report
    assert "`ok` close primary ingress" not in report


def _set_never_ready(info: LabInfo, value: str | None) -> None:
    api = k8s_config.new_client_from_config(
        config_file=str(Path(info.state_dir) / "dr.kubeconfig"), context="dr"
    )
    ns, name = topology.DRIFT_NEVER_READY
    patch = {"metadata": {"annotations": {"lab.drills.dev/never-ready": value}}}
    k8s.AppsV1Api(api).patch_namespaced_deployment(name, ns, patch)


def test_a_deployment_that_never_becomes_ready_rolls_back(
    drill_lab: LabInfo, history: HistoryStore
) -> None:
    plan = lab_plan(drill_lab)
    before = snapshot(plan)
    _set_never_ready(drill_lab, "true")
    try:
        with SplitBrainMonitor(drill_lab.endpoints["primary"], drill_lab.endpoints["dr"]) as mon:
            result = drill(plan, history, tier_deadline_s=2)
    finally:
        _set_never_ready(drill_lab, None)
    assert result.status == "rolled-back", result.error
    assert "embedding-server" in (result.error or "")
    assert "rollback" in phase_names(result)
    assert snapshot(plan) == before
    assert mon.both == []
    assert all(c.state == "undone" for c in drill_journal(history, result))


def drill_journal(history: HistoryStore, result: DrillResult) -> list[Any]:
    from drills.takeover.journal import Journal

    return Journal(history, result.run_id).changes()


def test_a_wrong_tsig_key_at_the_dns_switch_rolls_back(
    drill_lab: LabInfo, history: HistoryStore
) -> None:
    """The key is fine at preflight and wrong when DNS is switched (a rotated key, say)."""
    secret = Path(drill_lab.state_dir) / "tsig.secret"
    good = secret.read_text()
    plan = lab_plan(drill_lab)
    before = snapshot(plan)

    def break_key(event: str, phase: Any, step: Any) -> None:
        if event == "phase-end" and phase.name == "preflight":
            secret.write_text("d3JvbmcgdHNpZyBrZXkgZm9yIHRoZSB0ZXN0IQ==\n")

    try:
        result = drill(plan, history, hooks=DrillHooks(listener=break_key))
    finally:
        secret.write_text(good)
    assert result.status == "rolled-back", result.error
    assert "BADSIG" in (result.error or "") or "TSIG" in (result.error or "")
    assert good.strip() not in (result.error or "")
    # The DNS change never applied; everything else was undone in the safe order.
    assert snapshot(plan) == before


def test_a_failing_smoke_probe_rolls_back(drill_lab: LabInfo, history: HistoryStore) -> None:
    def expect_wrong_body(data: dict[str, Any]) -> None:
        data["smoke"][0]["expect_body"] = "a body the DR site never sends"
        data["smoke"][0]["timeout"] = "1s"

    plan = lab_plan(drill_lab, expect_wrong_body)
    before = snapshot(plan)
    result = drill(plan, history)
    assert result.status == "rolled-back"
    assert "smoke gateway" in (result.error or "")
    assert snapshot(plan) == before


def test_a_drill_whose_rollback_fails_stays_unfinished(
    drill_lab: LabInfo, history: HistoryStore
) -> None:
    """Smoke fails, and the undo of the DNS switch fails (the provider errs after the
    write). The run stays unfinished (nothing new starts on top of it, `drills recover
    --plan` finds it), and its report says the state was not verified."""
    from drills.errors import DrillError
    from drills.store.report import render_markdown, report_data
    from drills.takeover.lease import UnfinishedRunError
    from drills.takeover.recover import RecoverStatus, pick_run, recover_run

    def expect_wrong_body(data: dict[str, Any]) -> None:
        data["smoke"][0]["expect_body"] = "a body the DR site never sends"
        data["smoke"][0]["timeout"] = "1s"

    def dns_undo_fails(name: str) -> None:
        if name.startswith("undo dns.record"):
            raise DrillError("the DNS provider failed the undo (test)")

    plan = lab_plan(drill_lab, expect_wrong_body)
    before = snapshot(plan)
    result = drill(plan, history, hooks=DrillHooks(crash_point=dns_undo_fails))
    assert result.status == "rollback-failed", result.error
    assert result.drift is None
    stored = history.get_run(result.run_id)
    assert stored is not None and stored.finished_at is None
    assert stored.details.drift is None
    assert "Not verified" in render_markdown(report_data(stored, history))
    with pytest.raises(UnfinishedRunError):
        drill(plan, history)
    assert pick_run(history, None, plan.name).id == result.run_id
    assert stored is not None
    recovered = recover_run(history, plan, stored)
    assert recovered.status == RecoverStatus.RECOVERED, recovered.error
    assert snapshot(plan) == before


def _add_value(info: LabInfo, plan: DrillPlan, value: str) -> None:
    """Give the plan's DNS record a second value, beside the one it has."""
    import dns.rdata
    import dns.rdataclass

    from drills.targets.dns import Rfc2136Target
    from drills.targets.sites import Targets

    record = plan.dns.record
    with Targets(plan) as targets:
        target = targets.dns
        assert isinstance(target, Rfc2136Target)
        ttl = target.read(record.name, str(record.type))[0].ttl or 30
        message = target._update_message()
        message.add(record.name, ttl, dns.rdata.from_text(dns.rdataclass.IN, "A", value))
        assert target._send_update(message) == 0


def test_a_dns_record_with_two_values_is_refused_before_any_change(
    drill_lab: LabInfo, history: HistoryStore
) -> None:
    """It could be switched to DR and never back: refused at preflight, nothing changed."""
    plan = lab_plan(drill_lab)
    record = plan.dns.record
    address = f"{record.name}/{record.type}"
    before = snapshot(plan)
    (single,) = before[address]["values"]
    _add_value(drill_lab, plan, "127.0.0.9")
    try:
        two = snapshot(plan)
        assert sorted(two[address]["values"]) == sorted([single, "127.0.0.9"])
        result = drill(plan, history)
        assert result.status == "aborted", result.error
        assert "holds 2 values" in (result.error or "")
        assert history.journal(result.run_id) == []
        assert snapshot(plan) == two  # DNS untouched, and everything else
    finally:
        from drills.targets.sites import Targets

        with Targets(plan) as targets:
            targets.dns.update(record.name, str(record.type), single, before[address]["ttl"])
    assert snapshot(plan) == before


@pytest.mark.serial
@pytest.mark.parametrize("answer", ["refused", "timed out"])
def test_approval_refused_or_timed_out_changes_nothing(
    drill_lab: LabInfo, history: HistoryStore, answer: str
) -> None:
    def require_approval(data: dict[str, Any]) -> None:
        data["approval"] = {"required": True, "timeout": "2s"}

    plan = lab_plan(drill_lab, require_approval)
    before = snapshot(plan)

    def approve(request: DrillRequest) -> Approval:
        if answer == "timed out":
            from drills.takeover.drill import DrillAborted

            raise DrillAborted("approval timed out after 2 s")
        return Approval(False, "lead-sre", "not during the release freeze")

    result = drill(plan, history, hooks=DrillHooks(approve=approve))
    assert result.status == "aborted"
    assert phase_names(result)[-1] == "approve"
    assert snapshot(plan) == before
    assert drill_journal(history, result) == []


def test_preflight_blocks_a_drill_on_the_drifted_lab(
    drift_lab: LabInfo, history: HistoryStore
) -> None:
    plan = lab_plan(drift_lab)
    before = snapshot(plan)
    result = drill(plan, history)
    assert result.status == "aborted"
    assert "images.synced" in (result.error or "")
    assert snapshot(plan) == before


def test_incident_mode_leaves_dr_active_and_primary_fenced(
    tmp_path_factory: pytest.TempPathFactory, history: HistoryStore
) -> None:
    with own_lab(tmp_path_factory, "incident-lab", ready_delay=0.2) as info:
        plan = lab_plan(info)
        result = drill(plan, history, mode="incident")
        assert result.status == "succeeded", result.error
        assert "failback" not in phase_names(result)
        assert httpx.get(info.endpoints["dr"]).text == "dr\n"
        fenced = httpx.get(info.endpoints["primary"])
        assert fenced.status_code == 503 and "ingress closed" in fenced.text
        after = snapshot(plan)
        assert after["api.drills.test./A"]["values"] == [topology.DR_ADDR]
        writer = "primary/StatefulSet/serving/session-store"
        assert after[writer] == {"replicas": 0}


def test_cli_run_history_and_report(drill_lab: LabInfo, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    plan = str(Path(drill_lab.state_dir) / "plan.yaml")

    ran = drills_cli("run", plan, "--yes", "--reason", "quarterly drill", db=db)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "verdict:** **met**" in ran.stdout and "Identical to the snapshot" in ran.stdout
    runs = json.loads(drills_cli("history", "--json", db=db).stdout)
    assert len(runs) == 1
    wanted = {"id", "plan", "mode", "started_at", "verdict", "rto_seconds",
              "client_rto_seconds", "full_capacity_seconds", "rpo_seconds", "status"}  # fmt: skip
    assert wanted <= set(runs[0])
    # Minimum takeover: the service was restored before the normal tier was ready.
    assert 0 < runs[0]["rto_seconds"] < runs[0]["full_capacity_seconds"]
    assert runs[0]["status"] == "succeeded" and set(runs[0]["rpo_seconds"]) == {
        d.name for d in topology.DATASETS
    }
    report = json.loads(drills_cli("report", runs[0]["id"][:6], "--format", "json", db=db).stdout)
    assert report["run"]["reason"] == "quarterly drill"
    assert [c["state"] for c in report["journal"]] == ["undone"] * len(report["journal"])
    assert report["state_differences"] == {}
    assert report["full_capacity_seconds"] == runs[0]["full_capacity_seconds"]
    markdown = drills_cli("report", runs[0]["id"], db=db).stdout
    assert "| full capacity (normal tier ready) |" in markdown
    table = drills_cli("history", db=db).stdout
    assert timefmt.duration(runs[0]["full_capacity_seconds"]) in table
    missing = drills_cli("report", "nope", db=db)
    assert missing.returncode == 1 and "drills history" in missing.stderr


def test_full_drill_with_dns_on_route53_and_images_on_ecr(
    tmp_path_factory: pytest.TempPathFactory, history: HistoryStore
) -> None:
    """The same drill on a lab without BIND and the registries: Route 53 and ECR on moto."""
    with own_lab(tmp_path_factory, "route53-lab", ready_delay=0.2, system_services=False) as info:
        plan = lab_plan(info)
        assert plan.dns.provider == "route53"
        before = snapshot(plan)
        with SplitBrainMonitor(info.endpoints["primary"], info.endpoints["dr"]) as monitor:
            result = drill(plan, history)
        assert result.status == "succeeded", result.error
        readiness = history.get_run(result.run_id).readiness  # type: ignore[union-attr]
        failed = {r["id"] for r in readiness["results"] if r["status"] in ("fail", "error")}
        assert failed <= {"drill.cadence"}, failed
        assert snapshot(plan) == before
        assert monitor.both == [] and monitor.seen["dr"] > 0


def test_on_postgresql_db_upgrade_twice_a_drill_and_its_history(
    drill_lab: LabInfo, postgres: PostgresServer
) -> None:
    """As an operator does it: DRILLS_DB_URL names an empty PostgreSQL database."""
    db = postgres.create_database()
    env = os.environ | {"DRILLS_DB_URL": db, "COLUMNS": "200"}

    def drills(*args: str) -> subprocess.CompletedProcess[str]:
        return drills_process(args, env=env, timeout=300)

    plan = lab_plan(drill_lab)
    before = snapshot(plan)
    first, second = drills("db", "upgrade"), drills("db", "upgrade")
    assert first.returncode == 0 and "created at schema" in first.stdout, first.stderr
    assert second.returncode == 0 and "already at schema" in second.stdout, second.stderr
    ran = drills("run", str(Path(drill_lab.state_dir) / "plan.yaml"), "--yes", "--json")
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert json.loads(ran.stdout)["run"]["status"] == "succeeded"
    listed = drills("history", "--json")
    assert listed.returncode == 0, listed.stderr
    [run] = json.loads(listed.stdout)
    assert (run["mode"], run["status"], run["verdict"]) == ("drill", "succeeded", "met")
    assert snapshot(plan) == before
    postgres.drop_database(db)
