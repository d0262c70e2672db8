"""A loopback HTTP server that answers 404 to every request, as a misrouted proxy does.

Its body is a Kubernetes ``Status`` NotFound ("the server could not find the requested
resource"), which is also what a wrong path prefix in front of a real API server, or a
stale ingress in front of another one, answers. It counts the requests it answered, so
a test can tell which checks read it.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

STATUS = json.dumps(
    {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
     "message": "the server could not find the requested resource", "reason": "NotFound",
     "details": {}, "code": 404}
).encode()  # fmt: skip


class NotFoundServer:
    """``with NotFoundServer() as server:`` answers 404 at ``server.url`` until closed."""

    def __init__(self) -> None:
        self.requests = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with owner._lock:
                    owner.requests += 1
                self.send_response(404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(STATUS)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(STATUS)

            # http.server's names for the method handlers.
            do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _answer  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host}:{port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(2)

    def __enter__(self) -> NotFoundServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
