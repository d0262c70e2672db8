"""Two lab Kubernetes API servers (a primary and a DR) seeded per test, and a plan for them.

The cluster and secrets check tests build each failure the issue lists on their
own servers, so the shared lab fixtures stay untouched.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from drills.plan import DrillPlan, plan_from_text
from drills_lab.kubeapi import KubeApiServer, write_kubeconfig
from drills_lab.seed_cluster import node, secret, workload
from drills_lab.topology import LabWorkload, NodePool, SiteShape
from tests.support.checks import UNUSED_DNS, run_check

TOKEN = "kube-sites-" + secrets.token_hex(8)
DRIVER, CUDA = "550.54.15", "12.4"
GPU_POOL = NodePool("gpu", 2, 8, "96", "1024Gi")
CPU_POOL = NodePool("cpu", 1, 0, "64", "256Gi")
# Critical: a CPU gateway and a 1-GPU server at 2 replicas; normal: a 4-GPU trainer; batch.
WORKLOADS = (
    LabWorkload("serving", "gateway", "Deployment", "critical", "platform/gw:1.0", 2, 2, cpu="1",
             memory="2Gi"),
    LabWorkload("serving", "llm", "Deployment", "critical", "models/llm:0.6", 2, 2, gpu=1, cpu="8",
             memory="64Gi"),
    LabWorkload("serving", "sessions", "StatefulSet", "critical", "platform/sessions:7", 1, 1,
             cpu="2", memory="8Gi"),
    LabWorkload("training", "trainer", "Deployment", "normal", "training/trainer:1", 1, 1, gpu=4,
             cpu="32", memory="256Gi"),
    LabWorkload("batch", "eval", "Deployment", "batch", "batch/eval:0.3", 1, 1, gpu=1),
)  # fmt: skip


@dataclass
class SiteSpec:
    version: tuple[int, int] = (1, 30)
    pools: tuple[NodePool, ...] = (GPU_POOL, CPU_POOL)
    driver: str = DRIVER
    cuda: str = CUDA
    workloads: tuple[LabWorkload, ...] = WORKLOADS
    registry: str = "registry.example:5000"
    # (namespace, name) -> {key: value}; rotated-at is ``rotated`` unless None (no annotation)
    secrets: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    rotated: dt.datetime | None = None


@dataclass
class Pair:
    primary: KubeApiServer
    dr: KubeApiServer
    dir: Path

    def server(self, role: str) -> KubeApiServer:
        return self.primary if role == "primary" else self.dr


def seed(server: KubeApiServer, spec: SiteSpec, *, primary: bool) -> None:
    store = server.store
    for ns in sorted({w.namespace for w in spec.workloads} | {s[0] for s in spec.secrets}):
        if store.get("namespaces", None, ns) is None:
            store.create("namespaces", {"metadata": {"name": ns}})
    shape = SiteShape(spec.version[1], spec.driver, spec.cuda, spec.pools)
    for pool in spec.pools:
        for i in range(pool.count):
            store.create("nodes", node(pool, i, shape))
    for w in spec.workloads:
        resource = "deployments" if w.kind == "Deployment" else "statefulsets"
        replicas = w.primary_replicas if primary else 0
        store.create(resource, workload(w, spec.registry, replicas))
    rotated = spec.rotated or dt.datetime.now(dt.UTC) - dt.timedelta(days=3)
    for (ns, name), values in spec.secrets.items():
        obj = secret(ns, name, values, rotated)
        if spec.rotated is None:
            del obj["metadata"]["annotations"]
        store.create("secrets", obj)


@contextmanager
def site_pair(tmp_path: Path, primary: SiteSpec, dr: SiteSpec) -> Iterator[Pair]:
    """Two HTTPS servers with their own CA and a token, as the lab runs them."""
    servers = []
    try:
        for role, spec in (("primary", primary), ("dr", dr)):
            server = KubeApiServer(
                version=spec.version, token=TOKEN, ready_delay=0.05, name=role, tls=True
            )
            servers.append(server)
            server.start()
            seed(server, spec, primary=role == "primary")
            write_kubeconfig(
                tmp_path / f"{role}.kubeconfig",
                server_url=server.url,
                context=role,
                token=TOKEN,
                ca_pem=server.ca_pem,
            )
        yield Pair(servers[0], servers[1], tmp_path)
    finally:
        for server in servers:
            server.stop()


def point_at(tmp_path: Path, role: str, host_port: str) -> None:
    """Rewrite a site's kubeconfig to an address (a closed port, a silent listener)."""
    write_kubeconfig(
        tmp_path / f"{role}.kubeconfig", server_url=f"http://{host_port}", context=role, token=TOKEN
    )


def plan_for(
    tmp_path: Path,
    workloads: Iterable[LabWorkload] = WORKLOADS,
    *,
    plan_gpu: bool = True,
    k8s_secrets: Iterable[tuple[str, str, bool]] = (),
    aws_secrets: Iterable[tuple[str, bool]] = (),
    aws_endpoint: str | None = None,
    max_age_days: int = 90,
) -> DrillPlan:
    """A valid plan over the pair's kubeconfigs; registry, storage and DNS are never contacted."""

    def site(role: str, addr: str, region: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kubernetes": {"kubeconfig": str(tmp_path / f"{role}.kubeconfig"), "context": role},
            "registry": {"kind": "oci", "url": f"http://{addr}:5000"},
            "objects": {"endpoint_url": f"http://{addr}:9000", "region": region},
            "ingress": {"mode": "ingress", "objects": [{"namespace": "serving", "name": "public"}]},
            "endpoint": f"http://{addr}:18080/healthz",
        }
        if aws_endpoint:
            out["aws"] = {"region": region, "endpoint_url": aws_endpoint}
        return out

    data = {
        "name": "kube-sites",
        "sites": {
            "primary": site("primary", "127.0.0.2", "us-east-1"),
            "dr": site("dr", "127.0.0.3", "us-west-2"),
        },
        "workloads": [
            {
                "name": w.name,
                "namespace": w.namespace,
                "kind": w.kind,
                "tier": w.tier,
                "dr_replicas": w.dr_replicas,
                "gpu": w.gpu if plan_gpu else 0,
            }
            for w in workloads
        ],
        "secrets": {
            "max_age_days": max_age_days,
            "kubernetes": [
                {"namespace": ns, "name": name, "per_site": per_site}
                for ns, name, per_site in k8s_secrets
            ],
            "aws": [{"id": sid, "per_site": per_site} for sid, per_site in aws_secrets],
        },
        "dns": UNUSED_DNS,
        "objectives": {"rto": "15m", "rpo": "5m"},
    }
    return plan_from_text(yaml.safe_dump(data), "kube-sites.yaml")


run = run_check  # the name the cluster and secrets tests use
