"""DR's low-priority work (drills_lab.lowprio) started on a running lab through the
official client, as a platform team would apply it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from drills_lab import lowprio
from drills_lab.runtime import LabInfo


def dr_api(info: LabInfo) -> k8s.ApiClient:
    config = str(Path(info.state_dir) / "dr.kubeconfig")
    return k8s_config.new_client_from_config(config_file=config, context="dr")


def _create(api: k8s.ApiClient, obj: dict[str, Any]) -> None:
    kind = obj["kind"]
    if kind == "Namespace":
        k8s.CoreV1Api(api).create_namespace(obj)
    elif kind == "Deployment":
        k8s.AppsV1Api(api).create_namespaced_deployment(obj["metadata"]["namespace"], obj)
    elif kind == "ClusterQueue":
        k8s.CustomObjectsApi(api).create_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta1", "clusterqueues", obj
        )
    else:
        k8s.CustomObjectsApi(api).create_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta1", obj["metadata"]["namespace"], "localqueues", obj
        )


def running_pods(api: k8s.ApiClient) -> int:
    pods = k8s.CoreV1Api(api).list_namespaced_pod(lowprio.NAMESPACE).items
    return sum(1 for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp)


def wait_for_the_work(info: LabInfo) -> None:
    """Until the work holds every DR GPU."""
    with dr_api(info) as api:
        deadline = time.monotonic() + 60
        while running_pods(api) < lowprio.replicas():
            if time.monotonic() > deadline:
                raise AssertionError("DR's low-priority work never held every DR GPU")
            time.sleep(0.1)


def start_low_priority_work(info: LabInfo, *, preemptible: bool = True) -> None:
    """Apply the work at DR and wait until it holds every DR GPU."""
    registry = info.registries["dr"].removeprefix("http://")
    with dr_api(info) as api:
        for obj in lowprio.manifests(registry, preemptible=preemptible):
            _create(api, obj)
    wait_for_the_work(info)
