"""The kinds readiness v2 reads, served by the lab API server as a real cluster serves them:
PriorityClasses, ResourceQuotas, DaemonSets with a pod per node, and Kueue's ClusterQueue,
LocalQueue and Workload, through kubectl and the official client."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from drills_lab.kubeapi import KubeApiServer
from drills_lab.seed_scheduling import seed_scheduling

Kubectl = Callable[..., subprocess.CompletedProcess[str]]
KUEUE = ("kueue.x-k8s.io", "v1beta1")


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl {result.args[2:]} failed: {result.stderr}"
    return result.stdout


def _cluster_queue(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohort": "test-pool",
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "default-flavor",
                            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "4"}],
                        }
                    ],
                }
            ],
        },
    }


def test_kubectl_lists_creates_and_gets_the_new_kinds(
    kubectl: Kubectl, kubectl_namespace: str, tmp_path: Path
) -> None:
    cq = f"cq-{uuid.uuid4().hex[:6]}"
    ns = kubectl_namespace
    manifest = tmp_path / "kueue.yaml"
    docs = [
        _cluster_queue(cq),
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
         "metadata": {"name": "team", "namespace": ns}, "spec": {"clusterQueue": cq}},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": f"pc-{cq}"}, "value": 1000},
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": ns},
         "spec": {"hard": {"requests.nvidia.com/gpu": "2"}}},
    ]  # fmt: skip
    manifest.write_text(yaml.safe_dump_all(docs))
    ok(kubectl("apply", "-f", str(manifest)))
    try:
        got = json.loads(ok(kubectl("get", "clusterqueue", cq, "-o", "json")))
        assert got["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "4"
        queues = ok(kubectl("get", "localqueues", "-n", ns, "-o", "name"))
        assert queues.strip() == "localqueue.kueue.x-k8s.io/team"
        assert f"pc-{cq}" in ok(kubectl("get", "pc", "-o", "name"))
        quota = json.loads(ok(kubectl("get", "quota", "q", "-n", ns, "-o", "json")))
        assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "2"}
        assert "clusterqueue" in ok(kubectl("api-resources", "--api-group=kueue.x-k8s.io"))
    finally:
        ok(kubectl("delete", "clusterqueue", cq))
        ok(kubectl("delete", "priorityclass", f"pc-{cq}"))


def test_official_client_reads_the_seeded_kinds_and_a_daemonset_gets_a_pod_per_gpu_node(
    kube_api: client.ApiClient, kube_server: KubeApiServer
) -> None:
    gpu = f"gpu-{uuid.uuid4().hex[:6]}"
    kube_server.store.create("nodes", {
        "metadata": {"name": gpu, "labels": {"nvidia.com/gpu.present": "true"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    })  # fmt: skip
    for ns in ("serving", "training"):
        kube_server.store.create("namespaces", {"metadata": {"name": ns}})
    seed_scheduling(kube_server.store, "dr", "registry.lab", drift=True)
    try:
        classes = {pc.metadata.name: pc.value for pc in
                   client.SchedulingV1Api(kube_api).list_priority_class().items}  # fmt: skip
        # The drift leaves the critical tier's class out at DR.
        assert classes == {"drills-normal": 100_000, "drills-batch": 1_000}
        quotas = client.CoreV1Api(kube_api).list_namespaced_resource_quota("serving").items
        assert quotas[0].spec.hard["requests.nvidia.com/gpu"] == "8"
        custom = client.CustomObjectsApi(kube_api)
        queues = custom.list_cluster_custom_object(*KUEUE, "clusterqueues")["items"]
        serving = next(q for q in queues if q["metadata"]["name"] == "serving-gpu")
        gpus = serving["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]
        assert (gpus["nominalQuota"], gpus["borrowingLimit"]) == ("1", "1")
        lq = custom.get_namespaced_custom_object(*KUEUE, "serving", "localqueues", "serving-queue")
        assert lq["spec"]["clusterQueue"] == "serving-gpu"
        workload = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
                    "metadata": {"name": "job-1"},
                    "spec": {"queueName": "serving-queue", "podSets": []}}  # fmt: skip
        custom.create_namespaced_custom_object(*KUEUE, "serving", "workloads", workload)
        listed = custom.list_namespaced_custom_object(*KUEUE, "serving", "workloads")["items"]
        assert [w["metadata"]["name"] for w in listed] == ["job-1"]

        apps = client.AppsV1Api(kube_api)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            ds = apps.read_namespaced_daemon_set("nvidia-device-plugin-daemonset", "gpu-operator")
            if ds.status and ds.status.number_ready == 1:
                break
            time.sleep(0.05)
        assert (ds.status.desired_number_scheduled, ds.status.number_ready) == (1, 1)
        pods = client.CoreV1Api(kube_api).list_namespaced_pod("gpu-operator").items
        assert [p.spec.node_name for p in pods] == [gpu]
    finally:
        for ns in ("serving", "training", "gpu-operator"):
            kube_server.store.delete("namespaces", None, ns)
        for name in ("serving-gpu", "training-gpu"):
            kube_server.store.delete("clusterqueues", None, name)
        for name in ("drills-normal", "drills-batch"):
            kube_server.store.delete("priorityclasses", None, name)
        kube_server.store.delete("nodes", None, gpu)
