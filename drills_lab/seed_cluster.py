"""Seed a lab site's Kubernetes objects: nodes, the ingress, workloads, secrets."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable
from typing import Any, Protocol

import yaml

from drills_lab import topology
from drills_lab.seed_scheduling import meta, node_taints, seed_scheduling, template_extras
from drills_lab.topology import LabWorkload, NodePool, SiteShape

TIER_LABEL = "drills.dev/tier"
ROTATED_AT = "drills.dev/rotated-at"
NEVER_READY = "lab.drills.dev/never-ready"


class ObjectWriter(Protocol):
    def create(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]: ...


def node(
    pool: NodePool, index: int, shape: SiteShape, site: str = "primary", *, drift: bool = False
) -> dict[str, Any]:
    labels = {
        "kubernetes.io/hostname": f"{pool.prefix}-{index}",
        "node.kubernetes.io/instance-type": "gpu" if pool.gpus else "cpu",
    }
    allocatable = {"cpu": pool.cpu, "memory": pool.memory, "pods": "110"}
    if pool.gpus:
        # The labels NVIDIA's GPU feature discovery publishes; parity checks read them.
        labels |= {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": pool.gpu_product,
            "nvidia.com/gpu.count": str(pool.gpus),
            "nvidia.com/cuda.driver-version.full": shape.driver,
            "nvidia.com/cuda.driver.major": shape.driver.split(".")[0],
            "nvidia.com/cuda.runtime-version.full": shape.cuda,
        }
        allocatable["nvidia.com/gpu"] = str(pool.gpus)
        if (
            drift
            and site == "dr"
            and labels["kubernetes.io/hostname"] == (topology.DRIFT_PLUGIN_NOT_READY_NODE)
        ):
            allocatable["nvidia.com/gpu"] = "0"  # its device plugin never registered
    taints = node_taints(site, pool.gpus > 0, drift=drift)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta(f"{pool.prefix}-{index}", None, **labels),
        "spec": {"taints": taints} if taints else {},
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {
                "kubeletVersion": f"v1.{shape.kube_minor}.4",
                "containerRuntimeVersion": "containerd://1.7.20",
                "osImage": "Ubuntu 22.04.4 LTS",
                "architecture": "amd64",
            },
        },
    }


def workload(
    w: LabWorkload, registry_host: str, replicas: int, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    extra_labels, extra_spec = template_extras(w)
    labels = {"app": w.name, TIER_LABEL: w.tier, **extra_labels}
    requests: dict[str, str] = {"cpu": w.cpu, "memory": w.memory}
    limits: dict[str, str] = {}
    if w.gpu:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(w.gpu)
    container: dict[str, Any] = {
        "name": w.name,
        "image": f"{registry_host}/{w.image}",
        "ports": [{"name": "http", "containerPort": 8080}],
        "resources": {"requests": requests, "limits": limits},
    }
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": w.name}},
        "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [container], **extra_spec},
        },
    }
    if w.kind == "StatefulSet":
        spec["serviceName"] = w.name
    m = meta(w.name, w.namespace, **labels)
    if annotations:
        m["annotations"] = annotations
    return {"apiVersion": "apps/v1", "kind": w.kind, "metadata": m, "spec": spec}


def secret(
    namespace: str, name: str, values: dict[str, str], rotated: dt.datetime
) -> dict[str, Any]:
    m = meta(name, namespace)
    m["annotations"] = {ROTATED_AT: rotated.isoformat(timespec="seconds")}
    kind = "kubernetes.io/dockerconfigjson" if ".dockerconfigjson" in values else "Opaque"
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": m,
        "type": kind,
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()},
    }


def ingress(open_class: str) -> dict[str, Any]:
    backend = {"service": {"name": "inference-gateway", "port": {"number": 8080}}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": meta(topology.INGRESS_NAME, topology.INGRESS_NAMESPACE),
        "spec": {
            "ingressClassName": open_class,
            "rules": [
                {
                    "host": topology.RECORD.rstrip("."),
                    "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]},
                }
            ],
        },
    }


def cluster_info(server_url: str, ca_pem: bytes | None) -> dict[str, Any]:
    """``kube-public/cluster-info`` as kubeadm publishes it: the server and CA, for anyone.

    Not every cluster has one (managed ones seldom do), but those that do give it a UID of
    their own, which tells clusters apart where ``kube-system`` may not be read.
    """
    cluster: dict[str, Any] = {"server": server_url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    kubeconfig: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "", "cluster": cluster}],
        "contexts": None,
        "current-context": "",
        "preferences": {},
        "users": None,
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta("cluster-info", "kube-public"),
        "data": {"kubeconfig": yaml.safe_dump(kubeconfig, sort_keys=False)},
    }


def seed_site(
    store: ObjectWriter,
    site: str,
    registry_host: str,
    secret_value: Callable[[str, str, str], str],
    *,
    drift: bool,
    drift_scheduling: bool = False,
) -> None:
    """Create one site's objects. The primary runs everything; DR holds standbys at 0."""
    shape = topology.SITES[site]
    namespaces = {w.namespace for w in topology.WORKLOADS} | {topology.CONTROLLER_NAMESPACE}
    for ns in sorted(namespaces):
        store.create(
            "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )
    for pool in shape.pools:
        for i in range(pool.count):
            store.create("nodes", node(pool, i, shape, site, drift=drift_scheduling))

    controller = LabWorkload(
        topology.CONTROLLER_NAMESPACE, topology.CONTROLLER_NAME, "Deployment", "critical",
        topology.CONTROLLER_IMAGE, 2, 2, cpu="1", memory="1Gi",
    )  # fmt: skip
    store.create("deployments", workload(controller, registry_host, 2))
    store.create("ingresses", ingress(topology.INGRESS_CLASS))

    for w in topology.WORKLOADS:
        replicas = w.primary_replicas if site == "primary" else 0
        annotations = None
        if drift and site == "dr" and (w.namespace, w.name) == topology.DRIFT_NEVER_READY:
            annotations = {NEVER_READY: "true"}
        resource = "deployments" if w.kind == "Deployment" else "statefulsets"
        store.create(resource, workload(w, registry_host, replicas, annotations))
        store.create("services", _service(w))

    seed_scheduling(store, site, registry_host, drift=drift_scheduling)

    rotated = dt.datetime.now(dt.UTC) - dt.timedelta(days=12)
    for s in topology.K8S_SECRETS:
        values = {key: secret_value(site, f"{s.namespace}/{s.name}", key) for key in s.keys}
        store.create("secrets", secret(s.namespace, s.name, values, rotated))


def _service(w: LabWorkload) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(w.name, w.namespace, app=w.name),
        "spec": {
            "selector": {"app": w.name},
            "ports": [{"name": "http", "port": 8080, "targetPort": 8080}],
        },
    }
