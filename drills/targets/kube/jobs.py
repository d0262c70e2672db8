"""batch/v1 Jobs at a site, for the validation jobs a drill runs: create, read, delete,
the pod that ran, its node, and the last lines of its log.

Through the same client and error translation as :mod:`drills.targets.kube`.
"""

from __future__ import annotations

from typing import Any

from drills.targets.kube.client import KubeTarget
from drills.targets.kube.errors import translated

JOBS = "/apis/batch/v1/namespaces/{namespace}/jobs"
JOB = JOBS + "/{name}"
PODS = "/api/v1/namespaces/{namespace}/pods"
POD_LOG = PODS + "/{name}/log"
NODE = "/api/v1/nodes/{name}"
# The GPU feature discovery labels the report keeps for the node a job ran on.
GPU_LABEL_PREFIXES = ("nvidia.com/gpu.", "nvidia.com/cuda.", "nvidia.com/mig.")


def job(kube: KubeTarget, namespace: str, name: str) -> dict[str, Any] | None:
    return kube.read(JOB, {"namespace": namespace, "name": name})


def create_job(kube: KubeTarget, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """Create the Job; not retried (a second POST after a lost answer is a 409)."""
    return kube._json("POST", JOBS, {"namespace": namespace}, body=manifest)


def delete_job(kube: KubeTarget, namespace: str, name: str) -> None:
    """Delete the Job and, behind it, its pods (``propagationPolicy: Background``, as
    ``kubectl delete job`` does); one already gone is fine."""
    if job(kube, namespace, name) is None:
        return
    body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
    kube._json("DELETE", JOB, {"namespace": namespace, "name": name}, body=body)


def job_pods(kube: KubeTarget, namespace: str, name: str) -> list[dict[str, Any]]:
    """The Job's pods, oldest first (the job controller labels each with the Job's name)."""
    pods = kube.pods(namespace, f"batch.kubernetes.io/job-name={name}")
    return sorted(pods, key=lambda p: str(p.get("metadata", {}).get("creationTimestamp", "")))


def pod_log(kube: KubeTarget, namespace: str, pod: str, lines: int) -> list[str]:
    """The last ``lines`` lines the pod's (first) container printed."""
    resp = kube._send(
        "GET", POD_LOG, {"namespace": namespace, "name": pod}, query=[("tailLines", str(lines))]
    )
    with translated(kube.target):
        text = resp.read().decode("utf-8", errors="replace")
    return text.splitlines()[-lines:]


def gpu_labels(kube: KubeTarget, node: str) -> dict[str, str]:
    """The node's GPU model and driver labels (nvidia.com/gpu.product, cuda.driver.major...)."""
    found = kube.read(NODE, {"name": node}) or {}
    labels = (found.get("metadata") or {}).get("labels") or {}
    return {k: str(v) for k, v in sorted(labels.items()) if k.startswith(GPU_LABEL_PREFIXES)}
