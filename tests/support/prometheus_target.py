"""A real Prometheus scraping a /metrics target whose value the test sets: SLOs that hold,
recover or breach on cue."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from drills_lab.loopback import loopback_client
from drills_lab.prometheus import PrometheusServer, ScrapeJob
from tests.support.services import require_system_binary

METRIC = "slo_test_latency_seconds"


class MetricTarget:
    """Serves ``slo_test_latency_seconds VALUE`` on /metrics; ``value`` is the test's."""

    def __init__(self) -> None:
        self.value = 0.1
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = f"# TYPE {METRIC} gauge\n{METRIC} {target.value}\n".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host!s}:{port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def wait_for_value(url: str, value: float, timeout: float = 20.0) -> None:
    """Until Prometheus answers ``value`` for the metric: a scrape has seen it."""
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        answer = loopback_client().get(f"{url}/api/v1/query", params={"query": METRIC}).json()
        result = answer["data"]["result"]
        seen = float(result[0]["value"][1]) if result else None
        if seen == value:
            return
        time.sleep(0.2)
    raise AssertionError(f"Prometheus never saw {METRIC} = {value} (last {seen})")


@contextmanager
def prometheus_scraping(workdir: Path, target: MetricTarget) -> Iterator[str]:
    """A real Prometheus (the lab's own way of starting one) scraping ``target`` every
    second; yields its URL."""
    require_system_binary("prometheus", "prometheus")
    server = PrometheusServer(workdir, [ScrapeJob("slo-test", {target.address: {}})])
    server.start()
    try:
        wait_for_value(server.url, target.value)
        yield server.url
    finally:
        server.stop()
