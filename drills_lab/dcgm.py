"""A DCGM exporter stand-in for one lab site: ``DCGM_FI_DEV_GPU_UTIL`` for every GPU of
every GPU node, with the labels NVIDIA's dcgm-exporter gives (gpu, UUID, device,
modelName, Hostname).

A GPU is busy (100 %) while a Ready pod on its node holds it, idle (0 %) otherwise: the
utilisation follows what runs there, so the lab's Prometheus measures what the pods do.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, Protocol

from drills_lab.httpserve import FastHTTPServer, get_handler, serve_in_thread
from drills_lab.kubeapi import pods as podlib
from drills_lab.procs import free_port

METRIC = "DCGM_FI_DEV_GPU_UTIL"
BUSY_PERCENT = 100
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ObjectLister(Protocol):
    def list(self, resource: str) -> list[dict[str, Any]]: ...

    @property
    def resource_version(self) -> int: ...


def gpu_uuid(site: str, node: str, index: int) -> str:
    """A stable UUID a GPU: the same node and index give the same one on every start."""
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'drills-lab/{site}/{node}/{index}')}"


def busy_gpus(store: ObjectLister) -> dict[str, int]:
    """GPUs held by Ready pods, by node."""
    return podlib.gpus_by_node([p for p in store.list("pods") if podlib.is_ready(p)])


def exposition(site: str, store: ObjectLister) -> str:
    """The metrics page: one series a GPU."""
    busy = busy_gpus(store)
    lines = [f"# HELP {METRIC} GPU utilization (in %).", f"# TYPE {METRIC} gauge"]
    for node in sorted(store.list("nodes"), key=lambda n: n["metadata"]["name"]):
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        model = str(labels.get("nvidia.com/gpu.product", "unknown")).replace("-", " ")
        count = podlib.node_gpus(node)
        held = min(busy.get(name, 0), count)
        for index in range(count):
            value = BUSY_PERCENT if index < held else 0
            lines.append(
                f'{METRIC}{{gpu="{index}",UUID="{gpu_uuid(site, name, index)}",'
                f'device="nvidia{index}",modelName="{model}",Hostname="{name}"}} {value}'
            )
    return "\n".join(lines) + "\n"


class DcgmExporter:
    """``/metrics`` of one site's GPUs, on the site's own address."""

    def __init__(self, site: str, store: ObjectLister, host: str, port: int = 0) -> None:
        self.site = site
        self.store = store
        self.host = host
        self.port = port or free_port(host)
        self._server: FastHTTPServer | None = None
        self._thread: threading.Thread | None = None
        # The page and the store's version it was made at: Prometheus scrapes every second,
        # and an unchanged store gives the same page (listing every pod to make it again
        # cost a lab a few percent of a core).
        self._page: tuple[int, bytes] | None = None

    @property
    def target(self) -> str:
        return f"{self.host}:{self.port}"

    def respond(self, path: str) -> tuple[int, bytes, str]:
        if path.split("?")[0] != "/metrics":
            return 404, b"not found\n", "text/plain"
        version, page = self.store.resource_version, self._page
        if page is None or page[0] != version:
            # A change during the listing leaves a newer page under the older version: the
            # next scrape makes it again.
            page = self._page = (version, exposition(self.site, self.store).encode())
        return 200, page[1], CONTENT_TYPE

    def start(self) -> None:
        handler = get_handler(self.respond)
        self._server, self._thread = serve_in_thread(
            self.host, self.port, handler, f"lab-dcgm-{self.site}"
        )

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
