"""Seed what decides whether a site's pods schedule: PriorityClasses, ResourceQuotas,
Kueue's queues, the NVIDIA device plugin DaemonSet, GPU node taints and the DR sentinel.

``drift`` seeds the faults of ``drills lab up --drift-scheduling`` at DR.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from drills_lab import topology
from drills_lab.kubeapi.controller import READY_DELAY_ANNOTATION
from drills_lab.topology import LabWorkload

if TYPE_CHECKING:
    from drills_lab.seed_cluster import ObjectWriter

SUCCESS_ANNOTATION = "drills.dev/last-success"
NEVER_READY_ON = "lab.drills.dev/never-ready-on"
_TOLERATE_GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def meta(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    """An object's metadata: its name, namespace (when namespaced) and labels."""
    m: dict[str, Any] = {"name": name, "labels": dict(labels)}
    if namespace is not None:
        m["namespace"] = namespace
    return m


def template_extras(w: LabWorkload) -> tuple[dict[str, str], dict[str, Any]]:
    """Labels and pod spec fields a workload's template gets: its priority class, its
    Kueue queue, and the toleration of the GPU taint when it uses GPUs."""
    labels: dict[str, str] = {}
    queue = topology.QUEUED.get((w.namespace, w.name))
    if queue:
        labels["kueue.x-k8s.io/queue-name"] = queue
    spec: dict[str, Any] = {"priorityClassName": topology.PRIORITY_CLASSES[w.tier][0]}
    if w.gpu:
        tolerations = [dict(_TOLERATE_GPU)]
        if w.name == "trainer":  # the training pool's dedicated nodes are the trainer's
            tolerations.append({**topology.DRIFT_TAINT, "operator": "Equal"})
        spec["tolerations"] = tolerations
    return labels, spec


def node_taints(site: str, gpu: bool, *, drift: bool) -> list[dict[str, str]]:
    if not gpu:
        return []
    taints = [dict(topology.GPU_TAINT)]
    if drift and site == "dr":
        taints.append(dict(topology.DRIFT_TAINT))
    return taints


def _priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": meta(name), "value": value, "globalDefault": False,
            "preemptionPolicy": "PreemptLowerPriority",
            "description": f"drills lab: the {name.removeprefix('drills-')} tier"}  # fmt: skip


def _quota(namespace: str, hard: dict[str, str], used: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": meta(f"{namespace}-quota", namespace),
            "spec": {"hard": hard}, "status": {"hard": dict(hard), "used": used}}  # fmt: skip


def _cluster_queue(
    name: str, gpus: int, borrow: int | None, used: dict[str, str]
) -> dict[str, Any]:
    gpu: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": str(gpus)}
    if borrow is not None:
        gpu["borrowingLimit"] = str(borrow)
    resources = [{"name": "cpu", "nominalQuota": "96"}, {"name": "memory", "nominalQuota": "768Gi"},
                 gpu]  # fmt: skip
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": meta(name),
        "spec": {
            "namespaceSelector": {}, "cohort": topology.KUEUE_COHORT,
            "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                                "flavors": [{"name": "default-flavor", "resources": resources}]}],
        },
        "status": {"flavorsUsage": [{"name": "default-flavor", "resources": [
            {"name": r, "total": used.get(r, "0"), "borrowed": "0"}
            for r in ("cpu", "memory", "nvidia.com/gpu")]}]},
    }  # fmt: skip


def _local_queue(namespace: str, name: str, cluster_queue: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
            "metadata": meta(name, namespace), "spec": {"clusterQueue": cluster_queue}}  # fmt: skip


# Standing workloads were running before the lab came up: ready at once, whatever
# --ready-delay says of the plan's workloads (a slow-rollout lab is still a clean one).
ALREADY_RUNNING = {READY_DELAY_ANNOTATION: "0"}


def _device_plugin(registry_host: str, not_ready_on: str | None) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "nvidia-device-plugin"}
    m = meta(topology.DEVICE_PLUGIN_NAME, topology.DEVICE_PLUGIN_NAMESPACE, **labels)
    m["annotations"] = dict(ALREADY_RUNNING)
    if not_ready_on:
        m["annotations"][NEVER_READY_ON] = not_ready_on
    container = {"name": "nvidia-device-plugin-ctr",
                 "image": f"{registry_host}/nvidia/k8s-device-plugin:v0.16.2"}  # fmt: skip
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": m,
        "spec": {"selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"nodeSelector": {"nvidia.com/gpu.present": "true"},
                     "tolerations": [dict(_TOLERATE_GPU)], "containers": [container],
                     "priorityClassName": "system-node-critical"}}},
    }  # fmt: skip


def sentinel(registry_host: str, last_success: dt.datetime) -> dict[str, Any]:
    """A small real workload kept running at DR; the lab writes its last success."""
    labels = {"app": topology.SENTINEL_NAME}
    m = meta(topology.SENTINEL_NAME, topology.SENTINEL_NAMESPACE, **labels)
    m["annotations"] = {
        SUCCESS_ANNOTATION: last_success.isoformat(timespec="seconds"),
        **ALREADY_RUNNING,
    }
    container = {"name": "sentinel", "image": f"{registry_host}/{topology.SENTINEL_IMAGE}",
                 "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}  # fmt: skip
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": m,
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [container]}}}}  # fmt: skip


def seed_scheduling(store: ObjectWriter, site: str, registry_host: str, *, drift: bool) -> None:
    """Create one site's scheduling objects; with ``drift``, DR gets the seeded faults."""
    drifted = drift and site == "dr"
    for name, value in topology.PRIORITY_CLASSES.values():
        if not (drifted and name == topology.DRIFT_MISSING_PRIORITY_CLASS):
            store.create("priorityclasses", _priority_class(name, value))
    sentinel_use = {"cpu": "500m", "memory": "512Mi"} if site == "dr" else {}
    store.create("resourcequotas", _quota(
        "serving", {"requests.cpu": "64", "requests.memory": "512Gi",
                    "requests.nvidia.com/gpu": "8", "pods": "50"},
        {"requests.cpu": sentinel_use.get("cpu", "0"),
         "requests.memory": sentinel_use.get("memory", "0"), "requests.nvidia.com/gpu": "0",
         "pods": "1" if site == "dr" else "0"}))  # fmt: skip
    store.create("resourcequotas", _quota(
        "training", {"requests.cpu": "64", "requests.memory": "512Gi",
                     "requests.nvidia.com/gpu": "8", "pods": "20"},
        {"requests.cpu": "0", "requests.memory": "0", "requests.nvidia.com/gpu": "0",
         "pods": "0"}))  # fmt: skip
    for (namespace, lq), cq in topology.KUEUE_QUEUES.items():
        gpus, borrow = (4, None) if cq == "serving-gpu" else (8, None)
        if drifted and cq == topology.DRIFT_QUEUE[0]:
            gpus, borrow = topology.DRIFT_QUEUE[1], topology.DRIFT_QUEUE[2]
        store.create("clusterqueues", _cluster_queue(cq, gpus, borrow, {}))
        store.create("localqueues", _local_queue(namespace, lq, cq))
    plugin_ns = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": topology.DEVICE_PLUGIN_NAMESPACE}}  # fmt: skip
    store.create("namespaces", plugin_ns)
    not_ready = topology.DRIFT_PLUGIN_NOT_READY_NODE if drifted else None
    store.create("daemonsets", _device_plugin(registry_host, not_ready))
    if site == "dr":
        store.create("deployments", sentinel(registry_host, dt.datetime.now(dt.UTC)))
