"""What `drills lab up --drift-capacity` seeds at DR: GPUs held by work that does not yield.

A Deployment outside the plan, at the critical tier's priority (so a takeover cannot preempt
it), holds every DR GPU but those the takeover needs at its ``dr_replicas``: DR brings the
minimum up, but has nothing to grow into when demand asks for more.
"""

from __future__ import annotations

from typing import Any

from drills_lab import topology
from drills_lab.seed_cluster import TIER_LABEL, ObjectWriter, workload
from drills_lab.seed_scheduling import ALREADY_RUNNING


def takeover_gpus() -> int:
    """GPUs the takeover's critical and normal tiers need at DR at their dr_replicas."""
    return sum(w.gpu * w.dr_replicas for w in topology.WORKLOADS if w.tier != "batch")


def dr_gpus() -> int:
    return sum(p.gpus * p.count for p in topology.SITES["dr"].pools)


def occupant(registry_host: str) -> dict[str, Any]:
    """The Deployment that holds the spare DR GPUs, one a pod, already running."""
    held = dr_gpus() - takeover_gpus()
    shape = topology.LabWorkload(
        topology.DRIFT_CAPACITY_NAMESPACE, topology.DRIFT_CAPACITY_NAME, "Deployment",
        "critical", "research/notebooks:1.0.0", held, 0, gpu=1, cpu="4", memory="16Gi",
    )  # fmt: skip
    obj = workload(shape, registry_host, held, dict(ALREADY_RUNNING))
    # Not a tier of the plan: only its priority says it is as important as the critical one.
    for labels in (obj["metadata"]["labels"], obj["spec"]["template"]["metadata"]["labels"]):
        labels.pop(TIER_LABEL, None)
    return obj


def seed_drift_capacity(store: ObjectWriter, registry_host: str) -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": topology.DRIFT_CAPACITY_NAMESPACE}}  # fmt: skip
    store.create("namespaces", namespace)
    store.create("deployments", occupant(registry_host))
