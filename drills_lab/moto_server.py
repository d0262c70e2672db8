"""moto in server mode, in this process: the lab's S3, Secrets Manager, Route 53 and ECR.

It runs in-process rather than as a child so a benchmark can fill its backends directly
(``moto.s3.models.s3_backends``), which is about 60 times faster than over HTTP.
moto's backends are process-global: two MotoServer instances in one process serve the
same data, and ``reset`` empties both.
"""

from __future__ import annotations

import logging
import threading

import httpx
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import BaseWSGIServer, make_server

from drills.errors import LabError
from drills_lab.httpserve import IDLE_POLL_S, shutdown_waking
from drills_lab.loopback import loopback_client
from drills_lab.procs import free_port

log = logging.getLogger("drills_lab.moto")


class _NoDelayRequestHandler(MotoRequestHandler):
    # With Nagle on, the body write after the header write waits for the client's
    # delayed ACK: ~40 ms per request on loopback. socketserver sets TCP_NODELAY per
    # accepted connection when this is True.
    disable_nagle_algorithm = True

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        # werkzeug would attach its own stderr handler and print every request.
        log.debug("%s %s", self.requestline, code)


class MotoServer:
    """A threaded werkzeug server for moto's all-services app on one port."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port or free_port(host)
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        """Bind the port and serve in a daemon thread. Returns once the socket listens."""
        if self._server is not None:
            return
        app = DomainDispatcherApplication(create_backend_app)
        try:
            server = make_server(
                self.host, self.port, app, threaded=True, request_handler=_NoDelayRequestHandler
            )
        except OSError as exc:
            raise LabError(f"moto cannot listen on {self.host}:{self.port}: {exc}") from exc
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": IDLE_POLL_S},
            name=f"moto-{self.port}",
            daemon=True,
        )
        thread.start()
        self._server, self._thread = server, thread
        log.info("moto serving on %s", self.url)

    def stop(self) -> None:
        """Stop serving and release the port. Idempotent; the data stays in the backends."""
        server, thread = self._server, self._thread
        self._server, self._thread = None, None
        if server is None:
            return
        shutdown_waking(server, server.shutdown)
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def reset(self) -> None:
        """Empty every moto backend (all services, all accounts) through its HTTP API."""
        if self._server is None:
            raise LabError("moto server is not running")
        try:
            response = loopback_client().post(f"{self.url}/moto-api/reset", timeout=10)
        except httpx.TransportError as exc:
            raise LabError(f"moto reset at {self.url} failed: {exc}") from exc
        if response.status_code != 200:
            raise LabError(f"moto reset at {self.url} answered HTTP {response.status_code}")

    def __enter__(self) -> MotoServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"MotoServer({self.url})"
