"""The lab that can be overloaded, its site metrics in the lab's real Prometheus, and
`capacity.carry` against them: numbers recomputed here from the lab's description."""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from drills.checks.areas.demand_query import DAY_S, peak_over
from drills.checks.base import Status
from drills.cli.app import app
from drills.plan import load_plan
from drills.store.history import HistoryStore
from drills.store.kinds import RunStatus, Verdict
from drills.takeover.drill import ACCEPT_ACTION, Drill, DrillRequest
from drills_lab import topology
from drills_lab.demand import DEMAND_PEAK_QUERY, DEMAND_QUERY, DEMAND_RESOLUTION, TROUGH_RPS
from drills_lab.load import BASE_LATENCY_S, PER_REPLICA_RPS
from drills_lab.runtime import LabInfo
from drills_lab.seed_capacity import dr_gpus, takeover_gpus
from tests.support.checks import run_check
from tests.support.drill import audit_events, snapshot
from tests.support.services import own_lab, require_system_binary

LLM = "serving/llm-server"


def _query(info: LabInfo, promql: str, at: float | None = None) -> list[dict[str, object]]:
    params = {"query": promql, "time": f"{at or time.time():.3f}"}
    answer = httpx.get(f"{info.prometheus}/api/v1/query", params=params).json()
    assert answer["status"] == "success", answer
    return list(answer["data"]["result"])


def wait_for_demand(info: LabInfo, above: float = TROUGH_RPS / 2, seconds: float = 60) -> None:
    """Until the recorded demand of the primary has been above ``above``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        # As capacity.carry asks it, at the lab plan's resolution.
        result = _query(info, DEMAND_PEAK_QUERY)
        if result and float(result[0]["value"][1]) > above:  # type: ignore[index]
            return
        time.sleep(0.5)
    raise AssertionError("Prometheus never recorded the lab's demand")


def _primary(info: LabInfo) -> str:
    return info.endpoints["primary"]


def _blast(url: str, rate: float, seconds: float) -> list[tuple[int, float]]:
    """An open-model load: one request every 1/rate s, whatever the answers take."""
    count = int(rate * seconds)

    def one(i: int) -> tuple[int, float]:
        time.sleep(max(0.0, start + i / rate - time.monotonic()))
        begun = time.monotonic()
        response = client.get(url)
        return response.status_code, time.monotonic() - begun

    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    with httpx.Client(timeout=10, limits=limits) as client, ThreadPoolExecutor(64) as pool:
        start = time.monotonic()
        return list(pool.map(one, range(count)))


def test_the_endpoint_queues_then_sheds_past_its_capacity(capacity_lab: LabInfo) -> None:
    url = _primary(capacity_lab)
    calm = _blast(url, 4, 2)
    assert {code for code, _ in calm} == {200}
    calm_median = statistics.median(t for _, t in calm)
    assert calm_median >= BASE_LATENCY_S
    # The primary's 2 LLM replicas serve 40 requests/s; the generator already sends up to 30.
    rush = _blast(url, 150, 2)
    served = sorted(t for code, t in rush if code == 200)
    shed = [code for code, _ in rush if code == 503]
    assert shed, "no 503 at 150 requests/s against 40 requests/s of capacity"
    assert {code for code, _ in rush} <= {200, 503}
    slow = served[int(len(served) * 0.9)]
    assert slow > 5 * calm_median, (slow, calm_median)


def test_site_metrics_are_scraped_with_the_site_label(capacity_lab: LabInfo) -> None:
    wait_for_demand(capacity_lab)
    capacity = _query(capacity_lab, "drills_lab_capacity_rps")
    by_site = {r["metric"]["site"]: float(r["value"][1]) for r in capacity}  # type: ignore[index]
    primary_llm = next(w for w in topology.WORKLOADS if f"{w.namespace}/{w.name}" == LLM)
    assert by_site == {"primary": primary_llm.primary_replicas * PER_REPLICA_RPS, "dr": 0.0}
    ready = _query(capacity_lab, f'drills_lab_ready_replicas{{workload="{LLM}"}}')
    assert {r["metric"]["site"]: float(r["value"][1]) for r in ready} == {  # type: ignore[index]
        "primary": primary_llm.primary_replicas, "dr": 0.0,
    }  # fmt: skip
    for series in ("drills_lab_requests_total{code=\"200\"}",
                   "drills_lab_request_duration_seconds_bucket{le=\"+Inf\"}",
                   "drills_lab_request_duration_seconds_count",
                   "drills_lab_tokens_generated_total"):  # fmt: skip
        sites = {r["metric"]["site"] for r in _query(capacity_lab, series)}  # type: ignore[index]
        assert "primary" in sites, series
    tokens = _query(capacity_lab, 'drills_lab_tokens_generated_total{site="primary"}')
    assert float(tokens[0]["value"][1]) > 0  # type: ignore[index]


def test_the_peak_of_the_last_24h_is_a_real_query(capacity_lab: LabInfo) -> None:
    wait_for_demand(capacity_lab)
    now = time.time()
    peak = peak_over(capacity_lab.prometheus, DEMAND_QUERY, DAY_S, 2.0, now)
    # At the same moment (a step of the peak's subquery), as demand moves on meanwhile.
    at = now - now % 2
    current = float(_query(capacity_lab, DEMAND_QUERY, at)[0]["value"][1])  # type: ignore[index]
    assert peak.value >= current
    # Demand is every request the primary gets: the generator's, and any test's rush.
    assert peak.value > TROUGH_RPS / 2
    assert peak.seen_at is not None and capacity_lab.started_at - 5 <= peak.seen_at <= now + 0.01
    # Recomputed over the lab's whole life, at the plan's resolution: the same points, as
    # subquery steps are aligned to the epoch (a finer step would also see the jitter of a
    # 15 s rate between scrapes, which the plan's resolution does not ask about).
    span = math.ceil(now - capacity_lab.started_at) + 5
    raw = _query(capacity_lab, f"max_over_time(({DEMAND_QUERY})[{span}s:{DEMAND_RESOLUTION}])", now)
    assert float(raw[0]["value"][1]) == pytest.approx(peak.value, rel=1e-9)


def _expected_replicas(peak: float) -> int:
    return math.ceil(round(peak / PER_REPLICA_RPS / 0.7, 9))


def test_carry_passes_on_a_clean_lab_with_its_numbers(capacity_lab: LabInfo) -> None:
    wait_for_demand(capacity_lab)
    plan = load_plan(Path(capacity_lab.state_dir) / "plan.yaml")
    result = run_check(plan, "capacity.carry")
    assert result.status is Status.PASS, result.summary
    row = result.evidence["services"][0]
    assert row["service"] == LLM and row["source"] == "prometheus"
    assert row["replicas_needed"] == _expected_replicas(row["peak"])
    assert row["gpus_needed"] == row["replicas_needed"]  # one GPU a replica
    # Every DR GPU is free; the rest of the takeover takes its dr_replicas' GPUs first; the
    # LLM server's Kueue queue (4 GPUs nominal, borrowing the training queue's unused 8,
    # as the lab seeds them) is what limits it, the embedding server's GPU counted first.
    nodes = dr_gpus() - takeover_gpus() + 2
    assert row["gpus_available"] == min(nodes, 4 + 8 - 1)
    assert row["gpus_missing"] == 0 and row["seen_at"]
    assert row["formula"].startswith("required = ceil(100% × ")
    assert (
        f"÷ 20 requests/s per replica ÷ (1 − 0.3)) = {row['replicas_needed']} replicas"
        in (row["formula"])
    )


def test_prometheus_down_or_no_series_is_an_error(capacity_lab: LabInfo, tmp_path: Path) -> None:
    doc = yaml.safe_load((Path(capacity_lab.state_dir) / "plan.yaml").read_text())
    closed = httpx.URL(capacity_lab.prometheus).copy_with(port=1)
    nothing = 'sum(drills_lab_no_such_metric{site="primary"})'
    for cost, query in ((str(closed), DEMAND_QUERY), (capacity_lab.prometheus, nothing)):
        doc["cost"]["prometheus"] = cost
        doc["demand"][LLM]["query"] = query
        path = Path(capacity_lab.state_dir) / "carry-variant.yaml"
        path.write_text(yaml.safe_dump(doc))
        result = run_check(load_plan(path), "capacity.carry")
        assert result.status is Status.ERROR, result.summary
        assert LLM in result.summary
    assert "no series" in result.summary
    # With a static figure beside the query, the fallback is used and said.
    doc["demand"][LLM]["static"] = 30
    path.write_text(yaml.safe_dump(doc))
    result = run_check(load_plan(path), "capacity.carry")
    assert result.status is Status.PASS
    assert result.evidence["fallbacks"] == [LLM]
    assert result.evidence["services"][0]["peak"] == 30


@pytest.fixture(scope="module")
def drifted_capacity_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    require_system_binary("prometheus", "prometheus")
    with own_lab(
        tmp_path_factory, "carry-drift", ready_delay=0.2, drift_capacity=True, slo=True
    ) as info:
        # Until the lab's morning asks for more than the dr_replicas carry within the reserve.
        llm = next(w for w in topology.WORKLOADS if f"{w.namespace}/{w.name}" == LLM)
        wait_for_demand(info, above=llm.dr_replicas * PER_REPLICA_RPS * 0.7)
        yield info


def test_carry_fails_on_drift_capacity_naming_the_service_and_gpus(
    drifted_capacity_lab: LabInfo,
) -> None:
    plan = load_plan(Path(drifted_capacity_lab.state_dir) / "plan.yaml")
    result = run_check(plan, "capacity.carry")
    assert result.status is Status.FAIL and result.blocking, result.summary
    row = result.evidence["services"][0]
    llm = next(w for w in topology.WORKLOADS if f"{w.namespace}/{w.name}" == LLM)
    assert row["gpus_available"] == llm.dr_replicas * llm.gpu  # room for the minimum only
    assert row["replicas_needed"] > llm.dr_replicas
    missing = row["replicas_needed"] - llm.dr_replicas
    assert row["gpus_missing"] == missing
    assert LLM in result.summary and f"{missing} GPUs missing" in result.summary
    # The minimum still fits: DR can start what the plan's dr_replicas ask for.
    assert run_check(plan, "cluster.gpu_capacity").status is Status.PASS


def test_the_capacity_report_sizes_the_target_from_measured_demand_and_says_what_is_missing(
    drifted_capacity_lab: LabInfo,
) -> None:
    """`drills capacity` on a DR short of the peak: its target is the one capacity.carry
    sizes (the measured services at the replicas their peak needs, the rest at dr_replicas),
    more than DR can schedule, and the recommendation names the GPUs missing."""
    plan_path = Path(drifted_capacity_lab.state_dir) / "plan.yaml"
    carry = run_check(load_plan(plan_path), "capacity.carry").evidence["services"][0]
    answer = CliRunner().invoke(app, ["capacity", str(plan_path), "--json"])
    assert answer.exit_code in (0, 1), answer.output
    report = json.loads(answer.output)
    llm = next(w for w in topology.WORKLOADS if f"{w.namespace}/{w.name}" == LLM)
    minimum = report["needed_minimum_gpus"]
    extra = (max(llm.dr_replicas, carry["replicas_needed"]) - llm.dr_replicas) * llm.gpu
    assert report["needed_target_gpus"] == minimum + extra > minimum
    recommendation = report["recommendation"]
    assert recommendation["missing_gpus"] > 0
    assert f"add {recommendation['missing_gpus']} GPUs at DR" in recommendation["text"]
    assert LLM in report["needed_target_note"]


def test_a_drill_past_the_accepted_carry_failure_serves_what_it_can_is_not_met_and_rolls_back(
    drifted_capacity_lab: LabInfo, tmp_path: Path
) -> None:
    """`--drift-capacity`, drilled as `drills run --accept-blocking capacity.carry` would: DR
    brings its whole minimum up (the LLM server grown no further than capacity.carry found
    room for, so the normal tier's GPUs stay its own), carries part of the peak, and the
    load probe at DR goes over its limits: not met, rolled back to the state before."""
    plan = load_plan(Path(drifted_capacity_lab.state_dir) / "plan.yaml")
    assert plan.slo and plan.load is not None  # the lab's own, asked for with slo=True
    history = HistoryStore(f"sqlite:///{tmp_path / 'h.db'}")
    refused = Drill(DrillRequest(plan, operator="tests", reason="ci"), history).run()
    assert refused.status == RunStatus.ABORTED and "capacity.carry" in (refused.error or "")

    before = snapshot(plan)
    # Without the lab's validation job: the drift leaves DR no GPU beyond its tiers' own,
    # so the job and the normal tier's trainer race for one, and the loser waits out its
    # 5 min deadline. What DR carries is this test's question, not the job. Without the SLOs
    # too: the shortfall also breaches DR's error-ratio SLO, whose watch stops the drill
    # whenever it sees the breach, before or after the load probe ends (on a loaded machine,
    # before); the load probe is this test's judge, and test_slo's are the SLOs.
    carried_only = plan.model_copy(update={"validation_jobs": (), "slo": ()})
    request = DrillRequest(carried_only, operator="tests", reason="how far does a short DR get",
                           accept_blocking=("capacity.carry",), tier_deadline_s=60)  # fmt: skip
    result = Drill(request, history).run()
    assert (result.status, result.verdict) == (RunStatus.ROLLED_BACK, Verdict.NOT_MET), result.error
    assert "load probe at DR" in (result.error or "")
    assert result.drift == {} and snapshot(plan) == before
    stored = history.get_run(result.run_id)
    assert stored is not None and stored.details.load is not None
    dr = stored.details.load["dr"]
    assert dr["p95_seconds"] > plan.load.p95 or dr["error_rate"] > plan.load.error_rate
    steps = {s["name"]: s for p in stored.timeline for s in p["steps"]}
    assert steps["readiness checks"]["evidence"]["accepted"] == ["capacity.carry"]
    # Kept with the run though it stopped after measuring it: the report's `capacity`.
    assert stored.details.capacity == steps["carry the primary's demand"]["evidence"]
    carried = stored.details.capacity["services"][0]
    llm = next(w for w in topology.WORKLOADS if f"{w.namespace}/{w.name}" == LLM)
    assert carried["scaled_to"] == carried["reached"] == llm.dr_replicas < carried["needed"]
    assert 0 < carried["percent_carried"] < 100
    # Every tier came up: the minimum was not starved by the LLM server's growth.
    assert all(s["status"] == "ok" for n, s in steps.items() if n.startswith("normal: "))
    [accepted] = [e for e in audit_events(history) if e.action == ACCEPT_ACTION]
    assert accepted.detail["checks"] == ["capacity.carry"] and accepted.reason
