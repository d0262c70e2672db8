"""`drills capacity` on a lab of its own, recomputed here from the lab's known inventory
(drills_lab.topology) and a pricing file the test writes; the idle ratio from the lab's real
Prometheus scraping its DCGM exporters."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import time
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from drills.plan import load_plan
from drills.targets.sites import Targets
from drills_lab import topology
from drills_lab.runtime import LabInfo
from tests.capacity.conftest import DR_GPU_NODES, wait_for_samples
from tests.support.cli import drills_process

PRICE = Decimal("3.1417")  # a GPU-hour of the lab's GPU model
NODE_PRICE = Decimal("25.13")  # a node-hour of the lab's GPU instance type
BUSY = ("batch", "eval-runner")  # a batch workload with one GPU, on the batch PriorityClass


def _plan(info: LabInfo) -> Path:
    return Path(info.state_dir) / "plan.yaml"


def _capacity(*args: str, **env_vars: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("DRILLS_PRICING", "DRILLS_PROMETHEUS_URL")
    }
    env["COLUMNS"] = "200"
    env.update(env_vars)
    return drills_process(["capacity", *args], timeout=120, env=env)


def _report(*args: str, code: int = 0, **env_vars: str) -> dict[str, Any]:
    result = _capacity(*args, "--json", **env_vars)
    assert result.returncode == code, result.stdout[-2000:] + result.stderr[-2000:]
    return dict(json.loads(result.stdout))


def _pricing(tmp_path: Path, doc: dict[str, Any]) -> str:
    path = tmp_path / "pricing.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _cents(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


DR_GPUS = sum(pool.count * pool.gpus for pool in topology.SITES["dr"].pools)
TAKEOVER_GPUS = sum(w.gpu * w.dr_replicas for w in topology.WORKLOADS if w.tier != "batch")


def test_clean_lab_figures_recomputed_from_the_inventory(
    capacity_lab: LabInfo, tmp_path: Path
) -> None:
    wait_for_samples(capacity_lab, len(DR_GPU_NODES))
    pricing = _pricing(
        tmp_path,
        {
            "currencyCode": "EUR",
            "gpuProducts": {topology.SITES["dr"].pools[0].gpu_product: str(PRICE)},
        },
    )
    report = _report(str(_plan(capacity_lab)), "--pricing", pricing, "--window", "5s")
    gpus = report["dr_gpus"]
    assert (gpus["allocatable"], gpus["reserved"], gpus["idle"]) == (DR_GPUS, DR_GPUS, DR_GPUS)
    assert (gpus["standby"], gpus["sentinel"], gpus["low_priority"]) == (0, 0, 0)
    assert gpus["unpriced_nodes"] == []
    assert report["needed_minimum_gpus"] == TAKEOVER_GPUS
    # The lab's plan measures the LLM server's demand (`demand`): the target sizes it for its
    # peak, at least its dr_replicas (test_carry_lab checks that arithmetic).
    assert report["needed_target_gpus"] >= TAKEOVER_GPUS
    assert "serving/llm-server" in report["needed_target_note"]
    assert report["currency"] == "EUR"
    expected = _cents(PRICE * DR_GPUS * 730)
    assert Decimal(str(report["standby_cost_per_month"])) == expected
    assert report["idle_source"] == "prometheus" and report["idle_ratio"] == 1.0
    assert report["effective_compute"] == {
        "physical_gpus": DR_GPUS, "availability": 1.0, "utilization": 0.0, "gpus": 0.0,
    }  # fmt: skip
    # The reserve is the larger of the minimum and the demand's target, and the target
    # follows the peak the lab has lived through so far (its day is 240 s): a lab past its
    # noon needs more than its minimum.
    recommended = max(TAKEOVER_GPUS, report["needed_target_gpus"])
    assert report["preemptible_gpus"] == DR_GPUS - recommended
    rec = report["recommendation"]
    assert rec["reserve_gpus"] == recommended and rec["missing_gpus"] == 0
    saving = _cents(PRICE * (DR_GPUS - recommended) * 730)
    assert Decimal(str(rec["saving_per_month"])) == saving
    assert f"{saving:,.2f}" in rec["text"]


def test_a_node_price_by_instance_type_is_shared_by_its_gpus(
    capacity_lab: LabInfo, tmp_path: Path
) -> None:
    pricing = _pricing(tmp_path, {"instanceTypes": {"gpu": str(NODE_PRICE)}, "GPU": "1000"})
    report = _report(str(_plan(capacity_lab)), DRILLS_PRICING=pricing)  # over the plan's file
    per_gpu = NODE_PRICE / 8  # the lab's GPU nodes have 8 GPUs each
    assert Decimal(str(report["standby_cost_per_month"])) == _cents(per_gpu * DR_GPUS * 730)
    assert report["currency"] == "USD"


def test_low_priority_work_and_the_idle_ratio_prometheus_measured(
    capacity_lab: LabInfo, tmp_path: Path
) -> None:
    plan = load_plan(_plan(capacity_lab))
    pricing = _pricing(tmp_path, {"GPU": str(PRICE)})
    with Targets(plan) as targets:
        kube = targets.site("dr").kube
        kube.scale(BUSY[0], "Deployment", BUSY[1], 1)
        try:
            kube.wait_ready(BUSY[0], "Deployment", BUSY[1], 1, deadline_s=30)
            time.sleep(4)  # the 3 s window then holds only samples of the busy GPU
            report = _report(str(_plan(capacity_lab)), "--pricing", pricing, "--window", "3s")
        finally:
            kube.scale(BUSY[0], "Deployment", BUSY[1], 0)
    gpus = report["dr_gpus"]
    assert gpus["low_priority"] == 1 and gpus["reserved"] == DR_GPUS - 1
    assert gpus["idle"] == DR_GPUS - 1
    assert Decimal(str(report["standby_cost_per_month"])) == _cents(PRICE * (DR_GPUS - 1) * 730)
    assert report["idle_source"] == "prometheus"
    assert report["idle_ratio"] == pytest.approx(1 - 1 / DR_GPUS, abs=1e-6)
    # Preempting the batch work gives a takeover every GPU back.
    assert report["recommendation"]["takeover_gpus"] == DR_GPUS


def test_an_unpriced_gpu_node_is_named_and_fails(capacity_lab: LabInfo, tmp_path: Path) -> None:
    pricing = _pricing(tmp_path, {"instanceTypes": {"p5.48xlarge": "98.32"}})
    report = _report(str(_plan(capacity_lab)), "--pricing", pricing, code=1)
    assert report["dr_gpus"]["unpriced_nodes"] == DR_GPU_NODES
    assert report["standby_cost_per_month"] is None
    assert report["recommendation"]["saving_per_month"] is None
    text = _capacity(str(_plan(capacity_lab)), "--pricing", pricing)
    assert text.returncode == 1 and all(name in text.stdout for name in DR_GPU_NODES)


@pytest.mark.parametrize(
    ("content", "said"),
    [("{", "not valid JSON or YAML"), ('{"GPU": "-2"}', "GPU must be a price of 0 or more")],
)
def test_a_bad_pricing_file_is_one_line_and_exit_2(
    capacity_lab: LabInfo, tmp_path: Path, content: str, said: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    result = _capacity(str(_plan(capacity_lab)), "--pricing", str(path))
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "bad.json" in lines[0], result.stderr


def test_prometheus_that_does_not_answer_is_a_stated_fallback(
    capacity_lab: LabInfo, tmp_path: Path, closed_port: str
) -> None:
    report = _report(str(_plan(capacity_lab)), DRILLS_PROMETHEUS_URL=f"http://{closed_port}")
    assert report["idle_source"] == "allocation"
    assert closed_port in report["idle_note"] and "from allocation" in report["idle_note"]
    assert report["idle_ratio"] == 1.0  # nothing holds a GPU: allocation says all idle


def _variant(info: LabInfo, name: str, change: dict[str, Any]) -> str:
    """The lab plan with its cost section changed, beside it (its relative files resolve)."""
    doc = yaml.safe_load(_plan(info).read_text())
    doc["cost"] = {k: v for k, v in {**doc["cost"], **change}.items() if v is not None}
    path = Path(info.state_dir) / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def test_without_prometheus_the_report_says_it_used_allocation(capacity_lab: LabInfo) -> None:
    plan = _variant(capacity_lab, "no-prometheus", {"prometheus": None})
    report = _report(plan)
    assert report["idle_source"] == "allocation" and "no Prometheus" in report["idle_note"]
    assert report["currency"] == "USD"  # the lab's own example pricing file


def test_a_demand_above_what_dr_holds_says_how_many_gpus_are_missing(capacity_lab: LabInfo) -> None:
    demand = {"requests_per_day": 10_000_000, "output_per_request": 800,
              "gpu_throughput": 4000, "reserve": 0.3, "availability": 0.95}  # fmt: skip
    report = _report(_variant(capacity_lab, "demand", {"demand": demand}), code=1)
    assert report["needed_target_gpus"] == 35  # the worked example: 34.8 GPUs
    missing = 35 - DR_GPUS
    assert report["recommendation"]["missing_gpus"] == missing
    assert f"add {missing} GPUs" in report["recommendation"]["text"]
    assert report["preemptible_gpus"] == 0


def test_the_lab_exports_dcgm_metrics_for_each_gpu(capacity_lab: LabInfo) -> None:
    wait_for_samples(capacity_lab, len(DR_GPU_NODES))
    answer = httpx.get(f"{capacity_lab.prometheus}/api/v1/query",
                       params={"query": 'DCGM_FI_DEV_GPU_UTIL{site="dr"}'}).json()  # fmt: skip
    series = [item["metric"] for item in answer["data"]["result"]]
    assert len(series) == DR_GPUS
    assert sorted({s["Hostname"] for s in series}) == DR_GPU_NODES
    assert len({s["UUID"] for s in series}) == DR_GPUS
    assert {s["modelName"] for s in series} == {"NVIDIA H100 80GB HBM3"}
    assert sorted({s["gpu"] for s in series}, key=int) == [str(i) for i in range(8)]


def test_gpus_busy_over_time_is_one_bounded_range_query(capacity_lab: LabInfo) -> None:
    from drills.capacity.idle import busy_over_time

    wait_for_samples(capacity_lab, len(DR_GPU_NODES))
    points = busy_over_time(capacity_lab.prometheus, DR_GPU_NODES, 60.0, points=20)
    assert 1 <= len(points) <= 21  # a step of 3 s over the minute: never the raw samples
    steps = {round(b[0] - a[0], 3) for a, b in itertools.pairwise(points)}
    assert steps <= {3.0}
    assert all(0 <= busy <= DR_GPUS for _, busy in points)
