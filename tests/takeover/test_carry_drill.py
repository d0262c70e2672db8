"""Scale to demand in a drill on the lab: the critical tier sized for the primary's demand at
T0, carry_seconds recorded, and everything put back exactly; a DR that cannot reach the
target serves what it has and the verdict says so."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from drills.plan import DrillPlan
from drills.store.history import HistoryStore
from drills.store.report import render_markdown, report_data
from drills.takeover.drill import Drill, DrillRequest, DrillResult
from drills_lab import topology
from drills_lab.kubeapi.daemonsets import NEVER_READY_ON
from drills_lab.load import PER_REPLICA_RPS
from drills_lab.runtime import LabInfo
from tests.capacity.test_carry_lab import wait_for_demand
from tests.support.drill import back_to_normal, lab_plan, snapshot
from tests.support.services import own_lab

LLM = ("serving", "llm-server")
DR_REPLICAS = next(w.dr_replicas for w in topology.WORKLOADS if (w.namespace, w.name) == LLM)


@pytest.fixture(scope="module")
def carry_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    with own_lab(tmp_path_factory, "carry-drill-lab", ready_delay=0.3) as info:
        # Until the primary asks for more than the LLM server's dr_replicas carry.
        wait_for_demand(info, above=DR_REPLICAS * PER_REPLICA_RPS * 0.7)
        yield info


@pytest.fixture()
def db_url(tmp_path: Path) -> str:
    """SQLite only: the store's own tests cover PostgreSQL; each drill here runs once."""
    return f"sqlite:///{tmp_path / 'history.db'}"


def _drill(plan: DrillPlan, history: HistoryStore) -> DrillResult:
    request = DrillRequest(plan, operator="tests", reason="ci", tier_deadline_s=20)
    return Drill(request, history).run()


def _llm_step(result: DrillResult) -> dict[str, Any]:
    for phase in result.timeline.phases:
        for step in phase.steps:
            if step.name.startswith("critical: serving/llm-server"):
                return dict(step.evidence)
    raise AssertionError("no bring-up step of the LLM server")


def test_a_drill_scales_to_demand_and_records_carry_seconds(
    carry_lab: LabInfo, history: HistoryStore
) -> None:
    plan = lab_plan(carry_lab)
    before = snapshot(plan)
    result = _drill(plan, history)
    assert result.status == "succeeded", result.error
    assert result.verdict == "met"
    m = result.measurement
    assert m is not None and m.capacity is not None and m.carry_seconds is not None
    row = m.capacity["services"][0]
    assert row["service"] == "serving/llm-server" and row["source"] == "prometheus"
    needed = math.ceil(round(row["demand"] / PER_REPLICA_RPS / 0.7, 9))
    assert row["needed"] == needed > DR_REPLICAS
    assert _llm_step(result)["replicas"] == needed == row["scaled_to"]
    assert row["reached"] >= needed and row["carried"] and row["percent_carried"] >= 100
    assert 0 < m.carry_seconds <= m.full_capacity_seconds + 1
    assert m.capacity["ratio"] == pytest.approx(row["percent_carried"] / 100, abs=1e-3)
    # Failed back exactly: the extra replicas are gone with the rest.
    assert snapshot(plan) == before
    stored = history.get_run(result.run_id)
    assert stored is not None and stored.carry_seconds == pytest.approx(m.carry_seconds, abs=1e-3)
    data = report_data(stored, history)
    assert data["carry_seconds"] == stored.carry_seconds
    assert data["capacity"]["services"][0]["needed"] == needed
    text = render_markdown(data)
    assert "## Capacity" in text and "| carry (DR runs the target's replicas) |" in text


def _apps(info: LabInfo) -> k8s.AppsV1Api:
    api = k8s_config.new_client_from_config(str(Path(info.state_dir) / "dr.kubeconfig"))
    return k8s.AppsV1Api(api)


def test_a_dr_short_of_the_target_serves_what_it_can_and_misses(
    carry_lab: LabInfo, history: HistoryStore
) -> None:
    """An incident, as a drill's readiness (capacity.carry) refuses to start this one: DR's
    LLM pods never become ready beyond its first GPU node, and the plan asks for more
    replicas than one node holds. DR serves at dr_replicas and carries part of the demand."""
    nodes = sorted(f"{p.prefix}-{i}" for p in topology.SITES["dr"].pools if p.gpus
                   for i in range(p.count))  # fmt: skip
    apps = _apps(carry_lab)
    stuck = {"metadata": {"annotations": {NEVER_READY_ON: ",".join(nodes[1:])}}}
    apps.patch_namespaced_deployment(LLM[1], LLM[0], stuck)

    # Small enough that the target needs more replicas than one node holds, large enough
    # that the target still leaves DR the GPUs of the normal tier: the lab's scheduler
    # does not overcommit, and a normal tier that cannot start fails the takeover.
    def small_replicas(data: dict[str, Any]) -> None:
        data["demand"]["serving/llm-server"]["per_replica"] = 4

    plan = lab_plan(carry_lab, small_replicas)
    before = snapshot(plan)
    try:
        request = DrillRequest(plan, mode="incident", operator="tests", reason="ci",
                               tier_deadline_s=15)  # fmt: skip
        result = Drill(request, history).run()
        assert result.status == "succeeded", result.error
        m = result.measurement
        assert m is not None and m.capacity is not None
        assert result.verdict == "missed"
        assert m.carry_seconds is None and not m.capacity["carried"]
        row = m.capacity["services"][0]
        assert DR_REPLICAS <= row["reached"] < row["needed"] == row["scaled_to"]
        expected = row["reached"] * 4 * 0.7 / row["demand"] * 100
        assert row["percent_carried"] == pytest.approx(expected, abs=0.1)
        assert "target not carried" in m.capacity["summary"]
        back_to_normal(plan, history, result.run_id)
        assert snapshot(plan) == before  # the extra replicas are gone with the rest
    finally:
        apps.patch_namespaced_deployment(
            LLM[1], LLM[0], {"metadata": {"annotations": {NEVER_READY_ON: None}}}
        )
