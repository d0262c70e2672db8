"""Readiness end to end: the CLI and the Prefect flow on the clean and the drifted lab, and
the flow keeping each check's deadline."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from drills.checks.base import CheckContext, CheckRegistry, Outcome, Status
from drills.checks.checkup import select_checks
from drills.orchestrator.rest import PrefectRest
from drills.store.history import HistoryStore
from drills_lab.runtime import LabInfo
from tests.support.checks import (
    DRIFT_FAILURES,
    V2_CHECKS,
    catalogued_check,
    drilled_days_ago,
)
from tests.support.cli import drills_process
from tests.support.drill import offline_lab_plan_text

ALL_CHECKS = {
    "images.synced", "data.replicated", "data.rpo", "data.checkpoint_fresh",
    "data.delete_protection", "secrets.synced", "secrets.rotation",
    "secrets.distinct_credentials", "cluster.reachable", "cluster.version_skew",
    "cluster.nodes_ready", "cluster.gpu_capacity", "cluster.gpu_driver_parity",
    "cluster.standby_parity", "dns.ttl", "dns.control", "drill.cadence", "sites.distinct",
    "plan.warnings", *V2_CHECKS, "forecast.rto", "orchestrator.placement", "capacity.preemptible",
    "slo.valid", "capacity.carry",
}  # fmt: skip


def drilled_recently(url: str, plan: str) -> None:
    """Record a successful drill 10 days ago: the cadence check needs one."""
    drilled_days_ago(url, plan, 10)


def readiness_cli(plan: Path, *args: str, db: str) -> subprocess.CompletedProcess[str]:
    return drills_process(["readiness", str(plan), "--db", db, *args], timeout=120)


def plan_path(info: LabInfo) -> Path:
    return Path(info.state_dir) / "plan.yaml"


def test_catalogue_has_every_check_with_its_text() -> None:
    specs = {s.id: s for s in select_checks()}
    assert set(specs) == ALL_CHECKS
    for spec in specs.values():
        assert len(spec.doc) > 40, spec.id


def test_lab_is_ready(lab: LabInfo, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    drilled_recently(db, "lab")
    started = time.perf_counter()
    result = readiness_cli(plan_path(lab), "--json", db=db)
    wall = time.perf_counter() - started
    assert result.returncode == 0, result.stdout + result.stderr
    payload = json.loads(result.stdout)
    assert payload["plan"] == "lab"
    statuses = {r["id"]: r["status"] for r in payload["results"]}
    assert set(statuses) == ALL_CHECKS
    assert set(statuses.values()) <= {"pass", "warn"}, statuses
    for r in payload["results"]:
        assert set(r) == {
            "id", "title", "category", "status", "blocking", "summary", "evidence",
            "duration_s", "remediation",
        }  # fmt: skip
    stored = HistoryStore(db).latest_readiness("lab")
    assert stored is not None and stored.ok
    print(f"readiness CLI on the lab: {wall:.2f}s wall")


def test_drift_lab_fails_with_exactly_the_seeded_faults(drift_lab: LabInfo, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    drilled_recently(db, "lab")
    result = readiness_cli(plan_path(drift_lab), "--json", db=db)
    assert result.returncode == 1, result.stderr
    results = json.loads(result.stdout)["results"]
    failed = {r["id"] for r in results if r["status"] in ("fail", "error")}
    assert failed == DRIFT_FAILURES, {r["id"]: r["summary"] for r in results}
    assert all(r["blocking"] for r in results if r["id"] in DRIFT_FAILURES)


def test_table_output_and_exit_codes(drift_lab: LabInfo, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    table = readiness_cli(plan_path(drift_lab), "--category", "DNS", "-v", db=db)
    assert table.returncode == 1
    assert "dns.ttl" in table.stdout and "BLOCKING" in table.stdout
    assert "images.synced" not in table.stdout
    assert HistoryStore(db).latest_readiness("lab") is None  # partial runs are not snapshots
    only = readiness_cli(plan_path(drift_lab), "--only", "dns.control", "--json", db=db)
    assert only.returncode == 0
    assert [r["id"] for r in json.loads(only.stdout)["results"]] == ["dns.control"]
    unknown = readiness_cli(plan_path(drift_lab), "--only", "nope.nothing", db=db)
    assert unknown.returncode == 2 and "nope.nothing" in unknown.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: Bad Name\n")
    invalid = readiness_cli(bad, db=db)
    assert invalid.returncode == 2 and "Traceback" not in invalid.stderr


def test_flow_publishes_the_same_table_as_the_cli(
    prefect_harness: None, lab: LabInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    from flows.readiness import artifact_key, readiness_check

    db = f"sqlite:///{tmp_path / 'h.db'}"
    monkeypatch.setenv("DRILLS_DB_URL", db)
    drilled_recently(db, "lab")
    # The two reads below must see one state: not a checkpoint turning fresh between them,
    # as after an earlier test on this lab stopped its training for longer than the RPO.
    # The lab's trainer writes one a minute once it trains again; a day's RPO target keeps
    # that one check from flipping between the flow's read and the CLI's.
    plan = plan_path(lab).with_name("plan-same-table.yaml")
    doc = yaml.safe_load(plan_path(lab).read_text())
    for dataset in doc["datasets"]:
        dataset["rpo_target"] = 86400
    plan.write_text(yaml.safe_dump(doc, sort_keys=False))
    try:
        returned = readiness_check(plan=str(plan))
        cli = json.loads(readiness_cli(plan, "--json", db=db).stdout)
    finally:
        plan.unlink()  # the lab is this worker's: leave it its one plan

    async def table() -> list[dict[str, str]]:
        async with get_client() as client:
            key = ArtifactFilterKey(any_=[artifact_key("readiness", "lab")])
            # The latest version: an earlier test on this worker's Prefect server may have
            # published the lab's readiness under the same key, with other results.
            found = await client.read_artifacts(
                artifact_filter=ArtifactFilter(key=key), sort=ArtifactSort.CREATED_DESC, limit=1
            )
            data = found[0].data
            return json.loads(data) if isinstance(data, str) else data  # type: ignore[return-value]

    rows = asyncio.run(table())
    shown = [(r["check"], r["status"], r["blocking"] == "yes") for r in rows]
    from_cli = [(r["id"], r["status"], r["blocking"]) for r in cli["results"]]
    assert sorted(shown) == sorted(from_cli)
    assert {r["id"] for r in returned["results"]} == ALL_CHECKS
    assert HistoryStore(db).latest_readiness("lab") is not None


HANG_S = 60.0


def test_a_hanging_check_ends_in_the_flow_at_its_deadline(
    prefect_harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flow runs the checks through the one runner: each is a task run of the flow
    run, and one that hangs is an error at its own deadline, not a flow that hangs."""
    from prefect.settings import PREFECT_API_URL
    from prefect.states import State

    from flows.readiness import readiness_flow

    released = threading.Event()
    registry = CheckRegistry()

    @catalogued_check(registry, "test.hangs", title="Hangs", category="Cadence", timeout_s=1)
    def hangs(ctx: CheckContext) -> Outcome:
        """Waits for a release that comes only once the flow has ended."""
        released.wait(HANG_S)
        return Outcome(Status.PASS, "released")

    @catalogued_check(registry, "test.answers", title="Answers", category="Cadence", timeout_s=30)
    def answers(ctx: CheckContext) -> Outcome:
        """Answers at once, from the typed context."""
        return Outcome(Status.PASS, f"plan {ctx.plan.name} at {ctx.now:%Y}")

    plan = tmp_path / "plan.yaml"
    plan.write_text(offline_lab_plan_text())
    monkeypatch.setenv("DRILLS_DB_URL", f"sqlite:///{tmp_path / 'h.db'}")
    started = time.monotonic()
    try:
        state: State[dict[str, object]] = readiness_flow(registry)(
            plan=str(plan), store=False, return_state=True
        )
        elapsed = time.monotonic() - started
    finally:
        released.set()
    assert state.is_completed(), state
    results = {r["id"]: r for r in state.result()["results"]}  # type: ignore[index]
    assert results["test.hangs"]["status"] == "error"
    assert results["test.hangs"]["summary"] == "timed out after 1 s"
    assert results["test.hangs"]["blocking"] is True
    assert results["test.answers"]["status"] == "pass"
    assert results["test.answers"]["summary"].startswith("plan lab at ")
    assert elapsed < HANG_S / 3, f"the flow took {elapsed:.1f}s"
    flow_run_id = str(state.state_details.flow_run_id)
    with PrefectRest(str(PREFECT_API_URL.value())) as api:
        tasks = dict(api.task_run_states(flow_run_id))
    assert tasks["test.answers"] == "COMPLETED" and "test.hangs" in tasks
