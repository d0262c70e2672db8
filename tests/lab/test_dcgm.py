"""The lab's DCGM exporter on its own store: a GPU is busy while a Ready pod holds it, and
the page a scrape gets follows every change of the store, though an unchanged store is
served the page made before."""

from __future__ import annotations

from typing import Any

from drills_lab.dcgm import METRIC, DcgmExporter
from drills_lab.kubeapi.store import ResourceStore


def gpu_node(name: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100"}},
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}},
    }


def pod(name: str, node: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
            ],
        },
    }


def made_ready(obj: dict[str, Any]) -> dict[str, Any]:
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return obj | {"status": ready}


def utilisation(exporter: DcgmExporter) -> list[int]:
    status, body, _ = exporter.respond("/metrics")
    assert status == 200
    return [int(line.rsplit(" ", 1)[1]) for line in body.decode().splitlines()
            if line.startswith(METRIC)]  # fmt: skip


def test_the_page_follows_the_store_and_is_made_again_only_when_it_changes() -> None:
    store = ResourceStore()
    store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": "default"}})  # fmt: skip
    store.create("nodes", gpu_node("gpu-0", 2))
    exporter = DcgmExporter("dr", store, "127.0.0.1")
    assert utilisation(exporter) == [0, 0]
    first = exporter.respond("/metrics")[1]
    assert exporter.respond("/metrics")[1] is first  # the store did not change
    store.create("pods", pod("holder", "gpu-0", 1))
    assert utilisation(exporter) == [0, 0]  # bound, not yet Ready
    store.patch("pods", "default", "holder", made_ready, subresource="status")
    assert utilisation(exporter) == [100, 0]
    store.delete("pods", "default", "holder")
    assert utilisation(exporter) == [0, 0]
    assert exporter.respond("/nothing")[0] == 404
