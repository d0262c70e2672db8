"""The service endpoint of a lab site.

It answers 200 with the site's name only while the site really serves: its
ingress is open (the Ingress keeps the serving class and the controller has
ready pods) and every critical workload is scaled up with a ready replica. Otherwise 503
with the reason. The smoke probe and the split-brain monitor probe this, so it
must reflect the Kubernetes state exactly, not a flag of its own.

While it serves, it serves only what its ready inference replicas can (see
:mod:`drills_lab.load`): past that, latency grows with the queue and 503s appear.
``/metrics`` gives the site's request, latency and token counters for Prometheus.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol

from drills_lab import topology
from drills_lab.httpserve import FastHTTPServer, serve_in_thread
from drills_lab.load import (
    CONTENT_TYPE,
    HEALTH_PATH,
    SERVICE_PATH,
    SiteLoad,
    capacity_rps,
    ready_replicas,
)


class ObjectReader(Protocol):
    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None: ...


def _workload_ready(obj: dict[str, Any] | None) -> bool:
    """Scaled up, with a ready replica: a Deployment part-way to more replicas serves with
    those it has (how much it serves is the capacity model's question)."""
    if obj is None:
        return False
    wanted = int(obj.get("spec", {}).get("replicas", 0) or 0)
    ready = int(obj.get("status", {}).get("readyReplicas", 0) or 0)
    return wanted > 0 and ready >= 1


def site_state(store: ObjectReader) -> tuple[bool, str]:
    """Whether the site serves, and why not."""
    ingress = store.get("ingresses", topology.INGRESS_NAMESPACE, topology.INGRESS_NAME)
    if ingress is None:
        return False, "ingress missing"
    if ingress.get("spec", {}).get("ingressClassName") != topology.INGRESS_CLASS:
        return False, "ingress closed"
    controller = store.get("deployments", topology.CONTROLLER_NAMESPACE, topology.CONTROLLER_NAME)
    if not _workload_ready(controller):
        return False, "ingress controller down"
    for w in topology.critical_workloads():
        resource = "deployments" if w.kind == "Deployment" else "statefulsets"
        if not _workload_ready(store.get(resource, w.namespace, w.name)):
            return False, f"{w.namespace}/{w.name} not ready"
    return True, "serving"


class SiteEndpoint:
    """HTTP endpoint of one site, on the site's own loopback address."""

    def __init__(self, site: str, store: ObjectReader, host: str, port: int) -> None:
        self.site = site
        self.store = store
        self.host = host
        self.port = port
        self.load = SiteLoad(site)
        # Offers the lab's users who arrived before a request, so it queues behind them.
        self.users_first: Callable[[], object] | None = None
        self._server: FastHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def serving_capacity(self) -> float | None:
        """Requests a second the site serves now; None when it does not serve at all."""
        serving, _ = site_state(self.store)
        return capacity_rps(ready_replicas(self.store)) if serving else None

    def metrics(self) -> bytes:
        ready = ready_replicas(self.store)
        serving, _ = site_state(self.store)
        return self.load.exposition(ready, capacity_rps(ready) if serving else 0.0).encode()

    def answer(self, path: str = SERVICE_PATH) -> tuple[int, bytes, float]:
        """One request to the service: (status, body, seconds to hold it before answering)."""
        handler = HEALTH_PATH if path == HEALTH_PATH else SERVICE_PATH
        if self.users_first is not None:
            self.users_first()
        serving, why = site_state(self.store)
        if not serving:
            self.load.refuse(handler)
            return 503, f"{self.site}: {why}\n".encode(), 0.0
        status, seconds = self.load.admit(capacity_rps(ready_replicas(self.store)), handler=handler)
        if status != 200:
            return status, f"{self.site}: over capacity\n".encode(), seconds
        return 200, f"{self.site}\n".encode(), seconds

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{HEALTH_PATH}"

    def start(self) -> None:
        site, endpoint = self.site, self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                kind = "text/plain; charset=utf-8"
                path = self.path.split("?")[0]
                if path == "/metrics":
                    status, body, kind = 200, endpoint.metrics(), CONTENT_TYPE
                else:
                    status, body, hold = endpoint.answer(path)
                    if hold > 0:
                        time.sleep(hold)  # the replicas' latency, and the queue's
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Drills-Site", site)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # a probe every 50 ms would drown the lab log

        self._server, self._thread = serve_in_thread(
            self.host, self.port, Handler, f"endpoint-{self.site}"
        )
        self.port = self._server.server_address[1]

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
