"""`drills capacity` for a DR pool of 200 nodes and 1,600 GPUs with 7 days of GPU metrics.

Data: 200 GPU nodes (150 of 8 H100s, 50 of 8 A100s, each priced by its GPU product), the
example plan's critical and normal standbys warm at DR, 900 one-GPU low-priority pods and
the sentinel, as the Kubernetes API lists them; and the answer Prometheus gives the
report's one query over 7 days (``avg_over_time(DCGM_FI_DEV_GPU_UTIL{…}[604800s:300s])``:
2,016 steps a series evaluated in Prometheus, one mean a GPU returned), as JSON bytes.

Ours: everything after the queries return: the answer parsed, the pool counted node by
node, priced, the idle ratio, the recommendation and the JSON report. Median of REPEATS.
Goal: at most 2 s. The query itself is checked to be bounded: a subquery with a step,
never the raw samples.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

from drills.capacity.idle import MAX_STEPS, parse_vector, step_for, utilisation_query
from drills.capacity.pricing import parse_pricing
from drills.capacity.report import Inputs, Needs, build_report
from drills.checks.areas.gpu_pool import critical_priority, pool_nodes, priority_classes
from drills.plan import DrillPlan, Tier, load_plan

ROOT = Path(__file__).resolve().parents[1]
NODES, GPUS_A_NODE, LOW_PRIORITY_PODS = 200, 8, 900
WINDOW_S = 7 * 86400.0
REPEATS = 7
GOAL_S = 2.0
H100, A100 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"
PRICING = json.dumps({"currencyCode": "USD", "gpuProducts": {H100: "2.49", A100: "1.29"}})


def _node(i: int) -> dict[str, Any]:
    product = H100 if i < 150 else A100
    return {
        "metadata": {"name": f"gpu-{i:03d}", "labels": {
            "nvidia.com/gpu.product": product, "node.kubernetes.io/instance-type": "p5.48xlarge",
        }},
        "spec": {},
        "status": {"allocatable": {"nvidia.com/gpu": str(GPUS_A_NODE), "cpu": "96"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }  # fmt: skip


def _pod(ns: str, owner: str, node: str, gpus: int, priority: str) -> dict[str, Any]:
    return {
        "metadata": {"namespace": ns, "name": f"{owner}-{random.randrange(10**9)}",
                     "ownerReferences": [{"kind": "ReplicaSet", "name": f"{owner}-7d9f8c",
                                          "controller": True}]},
        "spec": {"nodeName": node, "priorityClassName": priority,
                 "containers": [{"name": "c",
                                 "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
        "status": {"phase": "Running"},
    }  # fmt: skip


def dataset(plan: DrillPlan) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bytes]:
    random.seed(27)
    nodes = [_node(i) for i in range(NODES)]
    free = {n["metadata"]["name"]: GPUS_A_NODE for n in nodes}
    names = iter(sorted(free))
    pods = []

    def place(ns: str, owner: str, gpus: int, priority: str) -> None:
        node = next(n for n in names if free[n] >= gpus) if gpus > 1 else None
        node = node or next(n for n, left in free.items() if left >= gpus)
        free[node] -= gpus
        pods.append(_pod(ns, owner, node, gpus, priority))

    for w in plan.workloads:
        if w.tier is not Tier.BATCH and w.gpu:
            for _ in range(w.dr_replicas):
                place(w.namespace, w.name, w.gpu, "critical")
    for i in range(LOW_PRIORITY_PODS):
        place("batch", f"eval-{i % 40}", 1, "batch")
    result = [
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": str(g), "UUID": f"GPU-{n}-{g}",
                    "device": f"nvidia{g}", "modelName": "NVIDIA H100 80GB HBM3",
                    "Hostname": n},
         "value": [time.time(), f"{random.uniform(0, 100):.4f}"]}
        for n in sorted(free) for g in range(GPUS_A_NODE)
    ]  # fmt: skip
    answer = {"status": "success", "data": {"resultType": "vector", "result": result}}
    return nodes, pods, json.dumps(answer).encode()


def report_once(plan: DrillPlan, nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
                answer: bytes) -> tuple[float, dict[str, Any]]:  # fmt: skip
    began = time.perf_counter()
    classes = priority_classes([{"metadata": {"name": "critical"}, "value": 1_000_000},
                                {"metadata": {"name": "batch"}, "value": 1_000}])  # fmt: skip
    templates = {w.key: {"spec": {"priorityClassName": "critical"}} for w in plan.workloads}
    pool = pool_nodes(plan, nodes, pods, classes, critical_priority(plan, templates, classes))
    samples = parse_vector(json.loads(answer), "prometheus (bench)")
    minimum = sum(w.gpu * w.dr_replicas for w in plan.workloads if w.tier is not Tier.BATCH)
    needs = Needs(minimum, {"all": minimum}, None, None, "no demand")
    inputs = Inputs(plan.name, pool, needs, parse_pricing(PRICING, "bench"), None, samples,
                    None, WINDOW_S)  # fmt: skip
    out = build_report(inputs).to_json()
    return time.perf_counter() - began, out


def main() -> int:
    plan = load_plan(ROOT / "plans" / "gpu-platform.example.yaml")
    nodes, pods, answer = dataset(plan)
    query = utilisation_query([n["metadata"]["name"] for n in nodes], WINDOW_S)
    steps = WINDOW_S / step_for(WINDOW_S)
    bounded = "[604800s:300s]" in query and steps <= MAX_STEPS
    times, report = [], {}
    for _ in range(REPEATS):
        took, report = report_once(plan, nodes, pods, answer)
        times.append(took)
    median = statistics.median(times)
    gpus = report["dr_gpus"]
    series = len(json.loads(answer)["data"]["result"])
    print(f"pool: {len(nodes)} nodes, {gpus['allocatable']} GPUs, {len(pods)} GPU pods; "
          f"answer {len(answer) / 1e6:.1f} MB, {series} series")  # fmt: skip
    print(
        f"query: {len(query)} chars, {steps:.0f} steps a series in Prometheus, bounded: {bounded}"
    )
    print(f"report after the query: median {median:.3f} s, worst {max(times):.3f} s "
          f"of {REPEATS} (goal ≤ {GOAL_S:.0f} s); idle {report['idle_ratio']:.3f} "
          f"({report['idle_source']}), cost {report['currency']} "
          f"{report['standby_cost_per_month']:,.2f} a month")  # fmt: skip
    return 0 if median <= GOAL_S and bounded and report["idle_source"] == "prometheus" else 1


if __name__ == "__main__":
    raise SystemExit(main())
