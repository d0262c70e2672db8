"""THE PROOF of practice mode, on a lab whose API servers keep an audit log of every request:
a practice brings DR up and back to standby, and the primary's API server sees no write,
the production record's answer never changes on any authoritative server, the practice
name is restored exactly (absent, or as it was), and a practice killed part-way is
recovered to DR at standby with the primary untouched."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dns.message
import dns.query
import dns.rdatatype
import pytest
from typer.testing import CliRunner

from drills.cli import app
from drills.evidence.coverage import Period, chain_not_checked, coverage_markdown, coverage_over
from drills.plan import DrillPlan, Rfc2136Dns
from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus
from drills.targets.dns import dns_for
from drills.targets.dns.rfc2136 import parse_server
from drills_lab import topology
from drills_lab.kubeapi.audit import AuditEvent
from drills_lab.runtime import LabInfo
from drills_lab.slo_plan import lab_load, lab_slos
from tests.support.drill import lab_plan, lab_plan_file, snapshot
from tests.support.lab_audit import AuditCursor
from tests.support.services import own_lab
from tests.takeover.test_crash_matrix import run_cli_process

PRACTICE_NAME = "practice.drills.test."


@pytest.fixture(scope="module")
def audited_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    with own_lab(tmp_path_factory, "practice-lab", ready_delay=0.1, audit=True) as info:
        yield info


def _with_practice(name: str = PRACTICE_NAME) -> Any:
    def change(data: dict[str, Any]) -> None:
        data["practice"] = {"record": name}

    return change


class DnsSampler:
    """Asks every authoritative server for a name every 50 ms, straight with dnspython
    (not through drills), and keeps each distinct answer it saw."""

    def __init__(self, plan: DrillPlan, name: str, interval: float = 0.05) -> None:
        assert isinstance(plan.dns, Rfc2136Dns)
        self.servers = [parse_server(s) for s in plan.dns.servers]
        self.name, self.interval = name, interval
        self.seen: set[tuple[str, tuple[str, ...]]] = set()
        self.samples = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def ask(self, host: str, port: int) -> tuple[str, ...]:
        reply = dns.query.udp(dns.message.make_query(self.name, "A"), host, timeout=1.0, port=port)
        found = [rrset for rrset in reply.answer if rrset.rdtype == dns.rdatatype.A]
        return tuple(sorted(r.to_text() for rrset in found for r in rrset))

    def _run(self) -> None:
        while not self._stop.is_set():
            for host, port in self.servers:
                try:
                    self.seen.add((f"{host}:{port}", self.ask(host, port)))
                except Exception as exc:  # noqa: BLE001 - an unanswered sample is a failure
                    self.failures.append(f"{host}:{port}: {type(exc).__name__}")
            self.samples += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> DnsSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(3)


def _practice_values(plan: DrillPlan) -> list[tuple[tuple[str, ...], int | None]]:
    with dns_for(plan) as target:
        return [(a.values, a.ttl) for a in target.read(PRACTICE_NAME, "A")]


@contextmanager
def practice_name_held(plan: DrillPlan, value: str, ttl: int) -> Iterator[None]:
    """The practice name holding ``value`` for the test, and gone again after it."""
    with dns_for(plan) as target:
        target.update(PRACTICE_NAME, "A", value, ttl)
    try:
        yield
    finally:
        with dns_for(plan) as target:
            target.delete(PRACTICE_NAME, "A")


def _writes(events: list[AuditEvent]) -> list[str]:
    return [f"{e.method} {e.path}" for e in events if e.is_write]


def _run(plan_file: Path, db: str, *extra: str) -> Any:
    argv = ["run", str(plan_file), "--mode", "practice", "--yes", "--db", db]
    return CliRunner().invoke(app, [*argv, "--tier-deadline", "30", *extra])


def test_practice_brings_dr_up_and_back_without_touching_the_primary(
    audited_lab: LabInfo, tmp_path: Path
) -> None:
    plan_file = lab_plan_file(audited_lab, _with_practice())
    plan = lab_plan(audited_lab, _with_practice())
    db = f"sqlite:///{tmp_path / 'history.db'}"
    before = snapshot(plan)
    assert _practice_values(plan) == [((), None)]  # the practice name does not exist
    primary, dr = AuditCursor(audited_lab, "primary"), AuditCursor(audited_lab, "dr")
    with (
        DnsSampler(plan, plan.dns.record.name) as production,
        DnsSampler(plan, PRACTICE_NAME) as practice,
    ):
        result = _run(plan_file, db)
    assert result.exit_code == 0, result.output[-2000:]

    # The primary's API server was asked (reads), but never written to; DR's was.
    assert primary.since(), "the primary's audit log recorded nothing: it proves nothing"
    assert all(e.site == "primary" for e in primary.since())
    assert _writes(primary.since()) == []
    assert any("/scale" in w and w.startswith("PATCH") for w in _writes(dr.since()))
    # The production record answered the primary's address on every server, throughout.
    assert production.failures == [] and production.samples >= 20
    assert production.seen == {(s, (topology.PRIMARY_ADDR,)) for s, _ in production.seen}
    assert len(production.seen) == len(plan.dns.servers)  # type: ignore[union-attr]
    # DR was verified through the practice name, which is gone again.
    assert any(values == (topology.DR_ADDR,) for _, values in practice.seen)
    assert _practice_values(plan) == [((), None)]
    assert snapshot(plan) == before

    history = HistoryStore(db)
    [run] = history.list_runs(plan=plan.name)
    assert (run.mode, run.status) == (Mode.PRACTICE, RunStatus.SUCCEEDED)
    assert run.verdict is not None and run.rto_seconds is not None and run.rto_seconds > 0
    assert run.finished_at is not None and history.unfinished_runs(plan.name) == []
    phases = [p["name"] for p in run.timeline]
    assert "fence" not in phases and "dns" not in phases and "standby" in phases
    report = CliRunner().invoke(app, ["report", run.id, "--db", db])
    assert "does not count for the quarterly drill cadence" in report.output
    # Counted on its own; never as a drill.
    assert history.last_successful_drill(plan.name) is None
    covered = coverage_over(history, [plan.name], Period.parse("90d"), chain=chain_not_checked)
    [row] = covered.plans
    assert (row.practices, row.drilled) == (1, False)
    assert "| practices |" in coverage_markdown(covered)
    listed = CliRunner().invoke(app, ["history", "--mode", "practice", "--json", "--db", db])
    assert '"mode": "practice"' in listed.output and run.id in listed.output


def test_without_a_practice_name_dr_is_probed_at_its_endpoint(
    audited_lab: LabInfo, tmp_path: Path
) -> None:
    plan = lab_plan(audited_lab)
    assert plan.practice.record is None
    db = f"sqlite:///{tmp_path / 'history.db'}"
    before = snapshot(plan)
    primary = AuditCursor(audited_lab, "primary")
    with DnsSampler(plan, plan.dns.record.name) as production:
        result = _run(lab_plan_file(audited_lab), db)
    assert result.exit_code == 0, result.output[-2000:]
    assert _writes(primary.since()) == []
    assert {values for _, values in production.seen} == {(topology.PRIMARY_ADDR,)}
    assert snapshot(plan) == before
    [run] = HistoryStore(db).list_runs(plan=plan.name)
    smoke = [s for p in run.timeline for s in p["steps"] if s["name"].startswith("smoke ")]
    assert smoke and all(s["evidence"]["via"] == str(plan.sites.dr.endpoint) for s in smoke)
    assert all(s["evidence"]["status"] == 200 for s in smoke)


def _with_proofs(data: dict[str, Any]) -> None:
    """The practice name, the lab's DR-scoped SLOs and load probe, and one SLO on production
    that a practice must not watch (it could never hold: it would fail the practice)."""
    _with_practice()(data)
    port = urlsplit(data["smoke"][0]["url"]).port
    assert port is not None
    data["slo"] = [*lab_slos(), {"name": "production-only", "expr": "vector(1)", "op": "<",
                                 "threshold": 0, "hold": "5s"}]  # fmt: skip
    data["load"] = lab_load(topology.RECORD.rstrip("."), port)


def test_a_practice_runs_the_validation_job_the_load_at_dr_and_the_slos_scoped_to_dr(
    audited_lab: LabInfo, tmp_path: Path
) -> None:
    plan = lab_plan(audited_lab, _with_proofs)
    db = f"sqlite:///{tmp_path / 'history.db'}"
    before = snapshot(plan)
    primary = AuditCursor(audited_lab, "primary")
    result = _run(lab_plan_file(audited_lab, _with_proofs), db)
    assert result.exit_code == 0, result.output[-2000:]
    assert _writes(primary.since()) == []
    assert snapshot(plan) == before  # the Job is gone with DR's replicas

    [run] = HistoryStore(db).list_runs(plan=plan.name)
    assert run.verdict == "met"
    # Only the SLOs scoped to DR were watched, on the load's traffic, and held.
    assert [(s["name"], s["status"]) for s in run.details.slo] == [
        ("dr-error-ratio", "held"),
        ("dr-p95-latency", "held"),
    ]
    # The load went to DR through the practice name; none was put on the primary.
    assert run.details.load is not None and "primary" not in run.details.load
    assert run.details.load["dr"]["address"] == topology.DR_ADDR
    assert run.details.load["dr"]["ok"] == run.details.load["dr"]["sent"] > 0
    [job] = run.details.validation_jobs
    assert (job.verdict, job.deleted) == ("succeeded", True) and job.output


def test_a_practice_name_that_held_a_value_gets_it_back_exactly(
    audited_lab: LabInfo, tmp_path: Path
) -> None:
    plan = lab_plan(audited_lab, _with_practice())
    plan_file = lab_plan_file(audited_lab, _with_practice())
    with practice_name_held(plan, "192.0.2.7", 42):
        held = _practice_values(plan)
        assert held and all(v == (("192.0.2.7",), 42) for v in held)
        result = _run(plan_file, f"sqlite:///{tmp_path / 'history.db'}")
        assert result.exit_code == 0, result.output[-2000:]
        assert _practice_values(plan) == held


def test_a_dry_run_lists_dr_and_practice_name_changes_only(
    audited_lab: LabInfo, tmp_path: Path
) -> None:
    plan = lab_plan(audited_lab, _with_practice())
    before = snapshot(plan)
    result = _run(lab_plan_file(audited_lab, _with_practice()),
                  f"sqlite:///{tmp_path / 'h.db'}", "--dry-run", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output[-2000:]
    planned = json.loads(result.stdout)["planned_changes"]
    assert any(f"dns.name {PRACTICE_NAME}/A" in c for c in planned), planned
    assert any("workload.scale dr/" in c for c in planned), planned
    assert not [c for c in planned if "primary/" in c or "dns.record" in c]
    assert snapshot(plan) == before


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (_with_practice(topology.RECORD), "a name production serves from"),
        (_with_practice("API.Drills.Test"), "a name production serves from"),
    ],
)
def test_a_practice_on_a_production_name_is_refused_in_one_line(
    audited_lab: LabInfo, tmp_path: Path, change: Any, words: str
) -> None:
    primary = AuditCursor(audited_lab, "primary")
    result = _run(lab_plan_file(audited_lab, change), f"sqlite:///{tmp_path / 'h.db'}")
    assert result.exit_code == 3, result.output
    [line] = [x for x in result.output.splitlines() if x.strip()]
    assert line.startswith("refused: practice:") and words in line
    assert "Traceback" not in result.output
    assert _writes(primary.since()) == []


def test_a_practice_name_answering_the_primary_is_refused(
    audited_lab: LabInfo, tmp_path: Path
) -> None:
    plan = lab_plan(audited_lab, _with_practice())
    with practice_name_held(plan, topology.PRIMARY_ADDR, 60):
        result = _run(lab_plan_file(audited_lab, _with_practice()),
                      f"sqlite:///{tmp_path / 'h.db'}")  # fmt: skip
        assert result.exit_code == 3, result.output
        assert "answers the primary's value" in result.output
        assert _practice_values(plan)[0][0] == (topology.PRIMARY_ADDR,)


def test_a_practice_whose_dr_is_the_primary_cluster_is_refused(
    audited_lab: LabInfo, tmp_path: Path
) -> None:
    # A kubeconfig of another name that reaches the primary's API server: only the sites
    # themselves can tell that "DR" is the primary.
    state = Path(audited_lab.state_dir)
    (state / "alias.kubeconfig").write_bytes((state / "primary.kubeconfig").read_bytes())

    def dr_on_primary(data: dict[str, Any]) -> None:
        _with_practice()(data)
        data["sites"]["dr"]["kubernetes"] = {"kubeconfig": "alias.kubeconfig", "context": "primary"}

    primary = AuditCursor(audited_lab, "primary")
    result = _run(lab_plan_file(audited_lab, dr_on_primary), f"sqlite:///{tmp_path / 'h.db'}")
    assert result.exit_code == 3, result.output
    assert "refused: practice:" in result.output and "primary's cluster" in result.output
    assert _writes(primary.since()) == []


@pytest.mark.parametrize(
    "crash_at",
    [f"dns.name {PRACTICE_NAME}/A written", "phase:smoke at DR:end"],
)
def test_sigkill_during_a_practice_then_recover_leaves_dr_at_standby(
    audited_lab: LabInfo, tmp_path: Path, crash_at: str
) -> None:
    plan = lab_plan(audited_lab, _with_practice())
    plan_file = lab_plan_file(audited_lab, _with_practice())
    db = f"sqlite:///{tmp_path / 'history.db'}"
    before = snapshot(plan)
    primary = AuditCursor(audited_lab, "primary")
    argv = ["run", str(plan_file), "--mode", "practice", "--yes", "--db", db,
            "--tier-deadline", "30"]  # fmt: skip
    exitcode = run_cli_process(argv, crash_at, tmp_path / "run.log")
    assert exitcode == -signal.SIGKILL, (tmp_path / "run.log").read_text()[-1000:]
    assert snapshot(plan) != before  # killed with DR up: there is something to recover
    [run] = HistoryStore(db).unfinished_runs(plan.name)
    assert run.mode == Mode.PRACTICE

    recovered = CliRunner().invoke(app, ["recover", "--plan", plan.name, "--db", db])
    assert recovered.exit_code == 0, recovered.output[-2000:]
    assert snapshot(plan) == before
    assert _practice_values(plan) == [((), None)]
    assert _writes(primary.since()) == []
    assert HistoryStore(db).unfinished_runs(plan.name) == []
