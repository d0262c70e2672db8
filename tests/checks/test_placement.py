"""orchestrator.placement: fails inside the primary cluster, warns without a live worker
outside it; the workers come from a real Prefect server's work pool."""

from __future__ import annotations

import httpx
import pytest
import yaml

from drills.checks.base import Placement, Status, WorkerFact
from drills.orchestrator.worker_placement import gather, workers
from drills.plan import DrillPlan, plan_from_text
from tests.support.checks import run_check
from tests.support.drill import offline_lab_plan_data

DR_WORKER = (WorkerFact("drills-worker@dr", online=True),)


def plan(*, primary_in_cluster: bool = False) -> DrillPlan:
    data = offline_lab_plan_data()
    if primary_in_cluster:
        data["sites"]["primary"]["kubernetes"] = {"in_cluster": True}
    return plan_from_text(yaml.safe_dump(data, sort_keys=False))


@pytest.fixture(autouse=True)
def outside_any_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KUBERNETES_SERVICE_HOST", "DRILLS_CLUSTER"):
        monkeypatch.delenv(name, raising=False)


def in_cluster(monkeypatch: pytest.MonkeyPatch, cluster: str | None) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    if cluster:
        monkeypatch.setenv("DRILLS_CLUSTER", cluster)


def test_a_worker_outside_every_cluster_with_one_at_dr_passes() -> None:
    placed = Placement("worker", in_cluster=False, cluster=None, workers=DR_WORKER)
    result = run_check(plan(), "orchestrator.placement", placement=placed)
    assert result.status is Status.PASS, result.summary
    assert result.evidence["workers_outside_primary"] == ["drills-worker@dr"]


@pytest.mark.parametrize(
    ("cluster", "primary_in_cluster"), [("primary", False), (None, True)], ids=["said", "implied"]
)
def test_a_dashboard_inside_the_primary_cluster_fails(
    monkeypatch: pytest.MonkeyPatch, cluster: str | None, primary_in_cluster: bool
) -> None:
    in_cluster(monkeypatch, cluster)
    placed = gather("dashboard", api_url="")  # no Prefect: only this process's facts
    assert placed.in_cluster and placed.workers is None and placed.workers_error is None
    result = run_check(plan(primary_in_cluster=primary_in_cluster), "orchestrator.placement",
                       placement=placed)  # fmt: skip
    assert result.status is Status.FAIL and not result.blocking
    assert (
        result.summary == "this dashboard runs inside the primary cluster: it would go down with it"
    )


def test_no_live_worker_outside_the_primary_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    in_cluster(monkeypatch, "dr")
    pool = (WorkerFact("w@primary", online=True), WorkerFact("gone@dr", online=False))
    placed = Placement("worker", in_cluster=True, cluster="dr", workers=pool)
    result = run_check(plan(), "orchestrator.placement", placement=placed)
    assert (result.status, result.summary) == (
        Status.WARN, "no worker outside the primary cluster is online"
    )  # fmt: skip
    unlisted = Placement("worker", in_cluster=True, cluster="dr", workers_error="HTTP 503")
    unknown = run_check(plan(), "orchestrator.placement", placement=unlisted)
    assert unknown.status is Status.WARN
    assert unknown.summary == "the work pool's workers could not be listed: HTTP 503"


def test_without_prefect_the_process_outside_the_primary_is_the_orchestrator() -> None:
    result = run_check(plan(), "orchestrator.placement")  # the drill's preflight, the lab
    assert (result.status, result.summary) == (
        Status.PASS, "outside the primary; online outside it: this cli"
    )  # fmt: skip


def test_the_workers_come_from_the_prefect_work_pool(prefect_harness: None) -> None:
    from prefect.settings import PREFECT_API_URL

    api = str(PREFECT_API_URL.value()).rstrip("/")
    pool = "placement-pool"
    created = httpx.post(f"{api}/work_pools/", json={"name": pool, "type": "process"})
    assert created.status_code in (201, 409), created.text
    beat = httpx.post(f"{api}/work_pools/{pool}/workers/heartbeat", json={"name": "w1@dr"})
    assert beat.status_code == 204, beat.text
    assert workers(api, pool) == ((WorkerFact("w1@dr", online=True),), None)
    found, error = workers(api, "no-such-pool")
    assert found is None and error and "not found" in error
    assert workers("", pool) == (None, None)
    placed = gather("worker", api_url=api)  # the drills pool does not exist on this server
    assert placed.workers is None and "drills-process" in (placed.workers_error or "")
