"""Reads of what decides whether a pod schedules at a site: DaemonSets, PriorityClasses,
ResourceQuotas and Kueue's queues. Plain JSON dicts, as :class:`KubeTarget` returns them.

Kueue's kinds are read at ``kueue.x-k8s.io/v1beta1``; a cluster without Kueue answers
404 for its collections, which reads as "no queues" once its discovery confirms Kueue
is not installed (see :mod:`drills.targets.kube.discovery`).
"""

from __future__ import annotations

from typing import Any

from drills.targets.kube.client import KubeTarget

KUEUE = "/apis/kueue.x-k8s.io/v1beta1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def daemonsets(kube: KubeTarget) -> list[dict[str, Any]]:
    return kube.list_items("/apis/apps/v1/daemonsets")


def deployment(kube: KubeTarget, namespace: str, name: str) -> dict[str, Any] | None:
    return kube.workload(namespace, "Deployment", name)


def priority_classes(kube: KubeTarget) -> dict[str, dict[str, Any]]:
    """Every PriorityClass by name."""
    items = kube.list_items("/apis/scheduling.k8s.io/v1/priorityclasses")
    return {str(pc["metadata"]["name"]): pc for pc in items}


def resource_quotas(kube: KubeTarget, namespace: str) -> list[dict[str, Any]]:
    path = "/api/v1/namespaces/{namespace}/resourcequotas"
    return kube.list_items(path, {"namespace": namespace})


def cluster_queues(kube: KubeTarget) -> dict[str, dict[str, Any]]:
    """Every Kueue ClusterQueue by name; {} where Kueue is not installed."""
    return {str(q["metadata"]["name"]): q for q in kube.list_items(f"{KUEUE}/clusterqueues")}


def local_queue(kube: KubeTarget, namespace: str, name: str) -> dict[str, Any] | None:
    path = KUEUE + "/namespaces/{namespace}/localqueues/{name}"
    # None both when the queue is missing and when Kueue is not installed: either
    # way a workload labelled for it would never be admitted.
    return kube.read(path, {"namespace": namespace, "name": name})


__all__ = [
    "QUEUE_LABEL",
    "cluster_queues",
    "daemonsets",
    "deployment",
    "local_queue",
    "priority_classes",
    "resource_quotas",
]
