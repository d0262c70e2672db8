"""One application at a time, on the lab: `drills run --only APP` takes over (or practises)
that application alone. The other application's workloads are never written while it runs
(the audit logs of both sites' API servers) and never change (sampled at both sites every
50 ms); two applications run one after the other without a lease in the way; practices of
applications that share nothing hold their leases at once."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from typer.testing import CliRunner

from drills.cli import app
from drills.plan import DrillPlan
from drills.plan.claims import plan_claims
from drills.plan.only import only_applications
from drills.store.details import RunDetails
from drills.store.history import HistoryStore
from drills.takeover import lease
from drills.takeover.lease import PlanLease, TargetBusyError
from drills.takeover.orphans import orphans
from drills.targets.dns import dns_for
from drills_lab.runtime import LabInfo
from tests.support.drill import drills_cli, lab_plan, lab_plan_file, snapshot
from tests.support.lab_audit import AuditCursor
from tests.support.services import own_lab
from tests.takeover.test_crash_matrix import run_cli_process
from tests.takeover.test_orphans import add_run, dead_holder

PRACTICE_NAME = "practice.drills.test."
TRAINING = ("training/trainer", "training/data-loader")
PLATFORM = ("platform/model-registry", "platform/metrics-gateway")


def with_applications(data: dict[str, Any]) -> None:
    data["practice"] = {"record": PRACTICE_NAME}
    data["applications"] = [
        {"name": "training", "workloads": list(TRAINING), "datasets": ["training-data"]},
        {"name": "platform", "workloads": list(PLATFORM), "datasets": ["model-artifacts"],
         "dns_records": [PRACTICE_NAME]},
    ]  # fmt: skip


@pytest.fixture(scope="module")
def apps_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    """A lab of its own: these runs change it (and must put it back)."""
    with own_lab(tmp_path_factory, "apps-lab", ready_delay=0.1, audit=True) as info:
        yield info


@dataclass(frozen=True)
class Grouped:
    """The lab's plan with its applications, as a file and loaded, and a store of its own."""

    plan_file: Path
    plan: DrillPlan
    db: str


@pytest.fixture()
def grouped(apps_lab: LabInfo, tmp_path: Path) -> Grouped:
    return Grouped(lab_plan_file(apps_lab, with_applications),
                   lab_plan(apps_lab, with_applications),
                   f"sqlite:///{tmp_path / 'history.db'}")  # fmt: skip


class ReplicaSampler:
    """Reads spec.replicas of some workloads at both sites every 50 ms, straight from their
    API servers (not through drills), and keeps every value each one showed; and, from the
    servers' audit logs, every workload that a request wrote meanwhile (``written``)."""

    def __init__(self, info: LabInfo, keys: tuple[str, ...], interval: float = 0.05) -> None:
        self.apis = {
            site: k8s.AppsV1Api(k8s_config.new_client_from_config(
                config_file=str(Path(info.state_dir) / f"{site}.kubeconfig"), context=site))
            for site in ("primary", "dr")
        }  # fmt: skip
        self.keys, self.interval = keys, interval
        self.seen: dict[tuple[str, str], set[int | None]] = {}
        self.samples = 0
        self.written: set[str] = set()
        self._audits = [AuditCursor(info, site) for site in self.apis]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for site, api in self.apis.items():
                for key in self.keys:
                    namespace, name = key.split("/")
                    replicas = api.read_namespaced_deployment(name, namespace).spec.replicas
                    self.seen.setdefault((site, key), set()).add(replicas)
            self.samples += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> ReplicaSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.written = set().union(*(audit.written() for audit in self._audits))
        for api in self.apis.values():
            api.api_client.close()


def _run_only(plan_file: Path, db: str, app: str, *extra: str) -> Any:
    ran = drills_cli("run", str(plan_file), "--only", app, "--yes", "--json",
                     "--tier-deadline", "30", *extra, db=db)  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    return json.loads(ran.stdout)


def _sampled_run(
    info: LabInfo, grouped: Grouped, app: str, *extra: str
) -> tuple[Any, ReplicaSampler]:
    """`drills run --only APP` that succeeds, both applications' replicas sampled meanwhile."""
    with ReplicaSampler(info, TRAINING + PLATFORM) as sampler:
        report = _run_only(grouped.plan_file, grouped.db, app, *extra)
    assert report["run"]["status"] == "succeeded", report["run"]["error"]
    assert report["run"]["application"] == app
    # The audit logs saw the run's own writes: they would have seen any to the other's.
    assert sampler.written, "no write of the run in the audit logs: they would prove nothing"
    return report, sampler


def _assert_untouched(sampler: ReplicaSampler, keys: tuple[str, ...]) -> None:
    # Every request the API servers answered, not samples: none wrote these workloads.
    assert not sampler.written & set(keys), sampler.written
    # And read straight from the servers before, during and after, they never changed.
    assert sampler.samples >= 2
    for site in ("primary", "dr"):
        for key in keys:
            assert len(sampler.seen[(site, key)]) == 1, (site, key, sampler.seen[(site, key)])


def test_two_applications_drill_one_after_the_other_each_touching_only_its_own(
    apps_lab: LabInfo, grouped: Grouped
) -> None:
    plan, db = grouped.plan, grouped.db
    before = snapshot(plan)

    training, sampler = _sampled_run(apps_lab, grouped, "training")
    _assert_untouched(sampler, PLATFORM)
    # The sampler saw the application's own workload move: it would have seen the others.
    assert len(sampler.seen[("dr", "training/trainer")]) > 1
    assert set(training["rpo_seconds"]) == {"training-data", "checkpoints"}

    # Straight after, the other application: its lease is its own, nothing is in the way.
    _, sampler = _sampled_run(apps_lab, grouped, "platform")
    _assert_untouched(sampler, TRAINING)
    assert len(sampler.seen[("dr", "platform/model-registry")]) > 1
    assert snapshot(plan) == before

    history = json.loads(drills_cli("history", "--json", db=db).stdout)
    assert [r["application"] for r in history] == ["platform", "training"]
    table = drills_cli("history", db=db).stdout
    assert "lab (platform)" in table and "lab (training)" in table
    report = drills_cli("report", training["run"]["id"], "--format", "markdown", db=db).stdout
    assert "**Application:** `training` only" in report


def test_a_practice_of_one_application_leaves_the_others_practice_name_alone(
    apps_lab: LabInfo, grouped: Grouped
) -> None:
    plan = grouped.plan
    practised, sampler = _sampled_run(apps_lab, grouped, "training", "--mode", "practice")
    _assert_untouched(sampler, PLATFORM)
    # The practice name is the platform's: training's practice probed DR at its endpoint.
    steps = [s["name"] for p in practised["phases"] for s in p["steps"]]
    assert "no practice name: DR is probed at its endpoint" in steps
    with dns_for(plan) as dns:
        answers = dns.read(PRACTICE_NAME, "A")
    assert answers and all(a.values == () for a in answers)  # never created


def test_a_dry_run_of_one_application_lists_only_its_changes(grouped: Grouped) -> None:
    plan_file, db = grouped.plan_file, grouped.db
    dry = _run_only(plan_file, db, "platform", "--dry-run")
    planned = "\n".join(dry["planned_changes"])
    assert "platform/model-registry" in planned and "ingress" in planned
    assert "training/" not in planned


def test_practices_of_applications_that_share_nothing_hold_their_leases_at_once(
    apps_lab: LabInfo, history: HistoryStore
) -> None:
    def disjoint(data: dict[str, Any]) -> None:
        with_applications(data)
        serving = [f"{w['namespace']}/{w['name']}" for w in data["workloads"]
                   if w["namespace"] in ("serving", "batch")]  # fmt: skip
        data["applications"].append({"name": "serving", "workloads": serving,
                                     "datasets": ["checkpoints"]})  # fmt: skip

    plan: DrillPlan = lab_plan(apps_lab, disjoint)
    training, platform = only_applications(plan, "training"), only_applications(plan, "platform")

    def leased(view: DrillPlan, run_id: str, *, practice: bool = True) -> PlanLease:
        claims = plan_claims(view, practice=practice)
        return PlanLease(history, view.lease_name, run_id, claims=claims)

    with leased(training, "run-training"), leased(platform, "run-platform"):
        # Both held at once. The whole plan's practice wants the targets of both: refused,
        # naming the run in its way.
        with pytest.raises(TargetBusyError) as busy, leased(plan, "run-whole"):
            pass
        assert busy.value.run_id in ("run-training", "run-platform")
    # Two drills share the primary's fence and the production record: one at a time.
    with (
        leased(training, "drill-a", practice=False),
        pytest.raises(TargetBusyError) as busy,
        leased(platform, "drill-b", practice=False),
    ):
        pass
    assert busy.value.run_id == "drill-a" and "api.drills.test." in str(busy.value.claim)


def test_an_application_killed_part_way_holds_its_targets_until_recovered(
    grouped: Grouped, tmp_path: Path
) -> None:
    plan_file, plan, db = grouped.plan_file, grouped.plan, grouped.db
    before = snapshot(plan)
    argv = ["run", str(plan_file), "--only", "training", "--yes", "--db", db,
            "--tier-deadline", "30"]  # fmt: skip
    exitcode = run_cli_process(argv, "phase:full-capacity:end", tmp_path / "run.log")
    assert exitcode == -signal.SIGKILL, (tmp_path / "run.log").read_text()[-1000:]
    [crashed] = HistoryStore(db).unfinished_runs(plan.name)
    assert crashed.details.application == "training"

    # The other application's drill shares the fence the crashed run closed: refused, and
    # told which run to recover.
    refused = drills_cli("run", str(plan_file), "--only", "platform", "--yes", db=db)
    assert refused.returncode == 3, refused.stdout[-2000:] + refused.stderr[-2000:]
    assert f"drills recover {crashed.id}" in refused.stderr

    recovered = CliRunner().invoke(app, ["recover", "--plan", plan.name, "--db", db])
    assert recovered.exit_code == 0, recovered.output[-2000:]
    assert snapshot(plan) == before
    assert HistoryStore(db).unfinished_runs(plan.name) == []


def test_recover_orphans_reads_an_applications_run_by_its_own_lease(
    history: HistoryStore,
) -> None:
    """A live run of one application holds the application's lease, not the plan's: the
    scan must not take it for an orphan (and recover it under its feet)."""
    for run_id, name, holder in (("alive", "training", "otherhost:1:a"),
                                ("dead", "platform", dead_holder())):  # fmt: skip
        add_run(history, run_id, "lab", details=RunDetails(application=name))
        lease.acquire(history, f"lab/{name}", run_id, holder, lease_s=60)
    assert [r.id for r in orphans(history)] == ["dead"]


def test_readiness_of_one_application_checks_its_view_and_is_not_the_plans(
    grouped: Grouped,
) -> None:
    plan_file, db = grouped.plan_file, grouped.db
    argv = ("readiness", str(plan_file), "--category", "Data", "--json")
    whole = json.loads(drills_cli(*argv, db=db).stdout)
    training = json.loads(drills_cli(*argv, "--application", "training", db=db).stdout)
    said = json.dumps(training["results"])
    assert "training-data" in said and "checkpoints" in said
    assert "model-artifacts" not in said  # the platform's dataset
    assert "model-artifacts" in json.dumps(whole["results"])


def test_an_incident_of_one_application_and_its_failback_move_only_that_application(
    apps_lab: LabInfo, grouped: Grouped
) -> None:
    plan_file, plan, db = grouped.plan_file, grouped.plan, grouped.db
    before = snapshot(plan)
    _, sampler = _sampled_run(apps_lab, grouped, "training", "--mode", "incident",
                              "--reason", "training cluster lost")  # fmt: skip
    _assert_untouched(sampler, PLATFORM)

    # The failback follows its incident: the training application's view, nothing else.
    with ReplicaSampler(apps_lab, PLATFORM) as sampler:
        ran = drills_cli("run", str(plan_file), "--mode", "failback", "--yes", "--json",
                         "--reason", "primary back", db=db)  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    failback = json.loads(ran.stdout)
    assert failback["run"]["status"] == "succeeded", failback["run"]["error"]
    assert failback["run"]["application"] == "training"
    assert failback["state_differences"] == {}
    assert sampler.written & set(TRAINING), sampler.written
    _assert_untouched(sampler, PLATFORM)
    assert snapshot(plan) == before
