"""Readiness check of category "Cluster": do the DR GPU nodes advertise their GPUs?

A GPU node without a healthy NVIDIA device plugin advertises no ``nvidia.com/gpu``:
pods that request GPUs stay Pending there whatever its hardware.
"""

from __future__ import annotations

from typing import Any

from drills.checks.areas.cluster_resources import GPU, node_facts, pack_gpus, ready_condition
from drills.checks.base import EXAMPLES, CheckContext, Outcome, Status, check
from drills.plan import Tier
from drills.targets.kube import KubeTarget, daemonsets

PLUGIN_NAME = "nvidia-device-plugin"


def _plugin_sets(kube: KubeTarget) -> list[dict[str, Any]]:
    """The device plugin's DaemonSets: by name, as its Helm chart and the GPU operator
    name them (``nvidia-device-plugin``, ``nvidia-device-plugin-daemonset``)."""
    return [d for d in daemonsets(kube) if PLUGIN_NAME in d["metadata"]["name"]]


def _ready_nodes(kube: KubeTarget, sets: list[dict[str, Any]]) -> set[str]:
    """Nodes where a plugin pod is Ready."""
    ready: set[str] = set()
    for ds in sets:
        labels = ((ds.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        for pod in kube.pods(ds["metadata"]["namespace"], selector):
            if ready_condition(pod) is not None and (pod.get("spec") or {}).get("nodeName"):
                ready.add(pod["spec"]["nodeName"])
    return ready


@check(
    "cluster.device_plugin",
    title="GPU device plugin at DR",
    category="Cluster",
    reads=(
        "The DR cluster's NVIDIA device plugin DaemonSet pods and GPU nodes "
        "(nvidia.com/gpu.present label, allocatable nvidia.com/gpu)."
    ),
    blocks=(
        "The critical tier's GPU replicas no longer fit on the DR GPU nodes whose plugin pod "
        "is Ready and that advertise GPUs."
    ),
    warns=(
        "Fails without blocking when a DR GPU node has no Ready plugin pod or advertises no "
        "GPUs but the critical tier still fits."
    ),
    remediation=(
        "Repair the device plugin on the named DR nodes (its DaemonSet, node selector, "
        "drivers) until each advertises its GPUs."
    ),
)
def cluster_device_plugin(ctx: CheckContext) -> Outcome:
    """The NVIDIA device plugin DaemonSet has a Ready pod on every DR GPU node, and each of
    those nodes advertises allocatable ``nvidia.com/gpu``.

    GPU nodes are those labelled ``nvidia.com/gpu.present=true`` (GPU feature discovery)
    or advertising GPUs. A node whose plugin pod is not Ready, or that advertises no GPUs,
    is named. When the critical tier's GPU replicas no longer fit on the healthy GPU
    nodes the check fails and blocks; otherwise a sick node still fails (the DR pool is
    smaller than it looks) without blocking.
    """
    kube = ctx.targets.dr.kube
    nodes = [node_facts(n) for n in kube.nodes()]
    gpu_nodes = [n for n in nodes if n.gpus > 0 or n.labels.get("nvidia.com/gpu.present") == "true"]
    sets = _plugin_sets(kube)
    ready = _ready_nodes(kube, sets)
    sick = {n.name: ("plugin pod not Ready" if n.name not in ready else "no allocatable GPUs")
            for n in gpu_nodes if n.name not in ready or n.gpus == 0}  # fmt: skip
    healthy = [n.gpus for n in gpu_nodes if n.usable and n.name not in sick]
    critical = [w.gpu for w in ctx.plan.workloads_in(Tier.CRITICAL) for _ in range(w.dr_replicas)]
    _, unplaced = pack_gpus(critical, healthy)
    evidence: dict[str, Any] = {
        "daemonsets": [f"{d['metadata']['namespace']}/{d['metadata']['name']}" for d in sets],
        "gpu_nodes": len(gpu_nodes),
        "ready_on": len([n for n in gpu_nodes if n.name in ready]),
        "sick": dict(list(sick.items())[:EXAMPLES]),
        "healthy_gpus": sum(healthy),
        "critical_unplaced": unplaced,
    }
    if not gpu_nodes:
        return Outcome(Status.PASS, "no GPU nodes at DR: nothing to advertise", evidence)
    if not sets:
        sick = {n.name: "no device plugin DaemonSet" for n in gpu_nodes}
        evidence["sick"] = dict(list(sick.items())[:EXAMPLES])
    if not sick:
        return Outcome(
            Status.PASS, f"device plugin Ready on all {len(gpu_nodes)} DR GPU nodes", evidence
        )
    first, why = next(iter(sick.items()))
    return Outcome(
        Status.FAIL,
        f"{len(sick)} of {len(gpu_nodes)} DR GPU node(s) without a working device plugin "
        f"({first}: {why})" + ("; the critical tier no longer fits" if unplaced else ""),
        evidence,
        remediation=f"Look at the device plugin pod on {first} (`kubectl -n NAMESPACE describe "
        f"pod`, driver and container toolkit on the node) and restart it; the node advertises "
        f"{GPU} again once it registers.",
        blocking=unplaced > 0,
    )
