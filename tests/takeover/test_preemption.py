"""A takeover takes DR's GPUs back from its low-priority work: the lab's DR runs an offline
evaluation through Kueue on every DR GPU; a drill preempts it, records
``preemption_seconds``, and its rollback gives the work its GPUs back. Readiness warns
(capacity.preemptible) on a lab whose DR work is not preemptible, naming it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from drills.checks.base import Status
from drills.store.history import HistoryStore
from drills.store.report import render_markdown, report_data
from drills.takeover.drill import Drill, DrillRequest
from drills_lab import lowprio
from drills_lab.runtime import LabInfo
from tests.support.checks import run_check
from tests.support.cli import drills_process
from tests.support.drill import lab_plan, snapshot
from tests.support.lowprio import (
    dr_api,
    running_pods,
    start_low_priority_work,
    wait_for_the_work,
)
from tests.support.services import own_lab

WORK = f"{lowprio.NAMESPACE}/Deployment/{lowprio.NAME}"


@pytest.fixture()
def db_url(tmp_path: Path) -> str:
    """SQLite only: the store's own tests cover PostgreSQL; each full drill runs once."""
    return f"sqlite:///{tmp_path / 'history.db'}"


@pytest.fixture(scope="module")
def busy_dr_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    """`drills lab up --low-priority-work`: every DR GPU runs low-priority work; drills
    change the lab and put it back."""
    with own_lab(tmp_path_factory, "busy-dr-lab", ready_delay=0.3, low_priority_work=True) as info:
        assert info.low_priority_work
        wait_for_the_work(info)
        yield info


def test_preemptible_work_passes_and_the_forecast_counts_its_gpus_as_free(
    busy_dr_lab: LabInfo,
) -> None:
    plan = lab_plan(busy_dr_lab)
    result = run_check(plan, "capacity.preemptible")
    assert result.status is Status.PASS, result.summary
    assert result.evidence["gpus"] == lowprio.dr_gpus() and result.evidence["workloads"] == 1
    forecast = run_check(plan, "forecast.rto")
    assert not any("free GPUs" in b for b in forecast.evidence.get("blocked_by", [])), (
        forecast.evidence
    )


def test_a_drill_preempts_the_work_records_the_time_and_gives_it_back(
    busy_dr_lab: LabInfo, history: HistoryStore, tmp_path: Path
) -> None:
    plan = lab_plan(busy_dr_lab)
    before = snapshot(plan)
    started = time.monotonic()
    result = Drill(DrillRequest(plan, operator="tests", reason="ci", tier_deadline_s=30),
                   history).run()  # fmt: skip
    elapsed = time.monotonic() - started
    assert result.status == "succeeded", result.error
    m = result.measurement
    assert m is not None and m.preemption_seconds is not None
    # The victims end after their grace: the critical tier waited for them, within the run.
    assert 0 < m.preemption_seconds < min(m.rto_seconds, elapsed)
    step = next(s for p in result.timeline.phases for s in p.steps
                if s.name == "GPUs taken back from DR's low-priority work")  # fmt: skip
    assert step.evidence["victim_count"] >= 1
    assert all(
        v.startswith(f"{lowprio.NAMESPACE}/{lowprio.NAME}-") for v in step.evidence["victims"]
    )
    assert snapshot(plan) == before and result.drift == {}
    with dr_api(busy_dr_lab) as api:  # the rollback freed the GPUs: the work holds them all
        deadline = time.monotonic() + 30
        while running_pods(api) < lowprio.replicas():
            assert time.monotonic() < deadline, "the low-priority work never came back"
            time.sleep(0.1)

    run = history.get_run(result.run_id)
    assert run is not None and run.preemption_seconds == m.preemption_seconds
    data = report_data(run, history)
    assert data["preemption_seconds"] == m.preemption_seconds
    assert "GPUs taken back at DR (preemption)" in render_markdown(data)
    listed = drills_process(["history", "--json", "--db", history.url], timeout=60)
    listed.check_returncode()
    rows = {r["id"]: r for r in json.loads(listed.stdout)}
    assert rows[result.run_id]["preemption_seconds"] == m.preemption_seconds


def test_work_that_does_not_yield_is_named_by_readiness(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with own_lab(tmp_path_factory, "stubborn-dr-lab", ready_delay=0.2) as info:
        start_low_priority_work(info, preemptible=False)
        result = run_check(lab_plan(info), "capacity.preemptible")
    assert result.status is Status.WARN and not result.blocking
    assert WORK in result.summary
    why = result.evidence["not_preemptible"][0]
    assert why["workload"] == WORK and why["gpus"] == lowprio.dr_gpus()
    assert any(
        "is not below the critical tier's 1000000 (drills-critical)" in w for w in why["why"]
    )
    assert any("reclaimWithinCohort is Never" in w and lowprio.CLUSTER_QUEUE in w
               for w in why["why"])  # fmt: skip
