"""Low-priority work for the lab's DR pool: an offline evaluation that fills DR's GPUs
between takeovers and yields them when a takeover needs them.

It runs through Kueue (its namespace is one Kueue manages, its ClusterQueue holds all of
DR's GPUs, in the GPU cohort, never borrowing) on the batch PriorityClass, so the lab's
scheduler preempts it for the critical and normal tiers, and a rollback gives it back its
GPUs. ``manifests(preemptible=False)`` is the variant readiness must warn about: the work
on the critical tier's PriorityClass, in a queue that borrows what the critical tier's
ClusterQueue cannot reclaim.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drills_lab import topology
from drills_lab.kubeapi.kueue import MANAGED_NAMESPACE_LABEL, QUEUE_LABEL

if TYPE_CHECKING:
    from drills_lab.seed_cluster import ObjectWriter

NAMESPACE = "dr-batch"
NAME = "offline-eval"
CLUSTER_QUEUE = "dr-batch-gpu"
LOCAL_QUEUE = "offline-queue"
GPUS_PER_POD = 4
_PLURALS = {"Namespace": "namespaces", "ClusterQueue": "clusterqueues",
            "LocalQueue": "localqueues", "Deployment": "deployments"}  # fmt: skip
IMAGE = "batch/eval-runner:0.3.0"  # published to both registries with the plan's images


def dr_gpus() -> int:
    return sum(p.count * p.gpus for p in topology.SITES["dr"].pools)


def replicas() -> int:
    """Enough pods to hold every DR GPU: a takeover finds none free."""
    return dr_gpus() // GPUS_PER_POD


def seed_low_priority_work(store: ObjectWriter, registry_host: str) -> None:
    """Create the work in a site's store, as `drills lab up --low-priority-work` does."""
    for obj in manifests(registry_host):
        store.create(_PLURALS[obj["kind"]], obj)


def manifests(registry_host: str, *, preemptible: bool = True) -> list[dict[str, Any]]:
    """Namespace, ClusterQueue, LocalQueue and Deployment, in the order to create them."""
    gpu: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": str(dr_gpus())}
    if preemptible:
        gpu["borrowingLimit"] = "0"
    labels = {"app": NAME, QUEUE_LABEL: LOCAL_QUEUE}
    tier = "batch" if preemptible else "critical"
    container = {
        "name": NAME,
        "image": f"{registry_host}/{IMAGE}",
        "resources": {
            "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": str(GPUS_PER_POD)},
            "limits": {"nvidia.com/gpu": str(GPUS_PER_POD)},
        },
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": NAMESPACE, "labels": {MANAGED_NAMESPACE_LABEL: "true"}},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": CLUSTER_QUEUE},
            "spec": {
                "namespaceSelector": {},
                "cohort": topology.KUEUE_COHORT,
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [{"name": "default-flavor", "resources": [gpu]}],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": LOCAL_QUEUE, "namespace": NAMESPACE},
            "spec": {"clusterQueue": CLUSTER_QUEUE},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {"app": NAME}},
            "spec": {
                "replicas": replicas(),
                "selector": {"matchLabels": {"app": NAME}},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "priorityClassName": topology.PRIORITY_CLASSES[tier][0],
                        "tolerations": [
                            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                        ],
                        "containers": [container],
                    },
                },
            },
        },
    ]
