"""The service endpoint of a lab site.

It answers 200 with the site's name only while the site really serves: its
ingress is open (the Ingress keeps the serving class and the controller has
ready pods) and every critical workload is scaled up and ready. Otherwise 503
with the reason. The smoke probe and the split-brain monitor probe this, so it
must reflect the Kubernetes state exactly, not a flag of its own.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol

from drills_lab import topology
from drills_lab.httpserve import FastHTTPServer, serve_in_thread


class ObjectReader(Protocol):
    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None: ...


def _workload_ready(obj: dict[str, Any] | None) -> bool:
    if obj is None:
        return False
    wanted = int(obj.get("spec", {}).get("replicas", 0) or 0)
    ready = int(obj.get("status", {}).get("readyReplicas", 0) or 0)
    return wanted > 0 and ready >= wanted


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
        self._server: FastHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/healthz"

    def start(self) -> None:
        site, store = self.site, self.store

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                serving, why = site_state(store)
                body = (f"{site}\n" if serving else f"{site}: {why}\n").encode()
                self.send_response(200 if serving else 503)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
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
