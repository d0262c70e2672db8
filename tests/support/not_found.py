"""A loopback HTTP server that answers 404 to every request, as a misrouted proxy does.

Its body is a Kubernetes ``Status`` NotFound ("the server could not find the requested
resource"), which is also what a wrong path prefix in front of a real API server, or a
stale ingress in front of another one, answers. With ``names_object`` it goes further
and names, as an API server does for a missing object, whatever the path ends with. It
counts the requests it answered, so a test can tell which checks read it.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType


def status(path: str, *, names_object: bool) -> bytes:
    """A Status NotFound: for no object, or (``names_object``) for the path's last part."""
    kind, _, name = path.split("?")[0].rstrip("/").rpartition("/")
    kind = kind.rpartition("/")[2]
    details = {"name": name, "kind": kind} if names_object else {}
    message = f'{kind} "{name}" not found' if names_object else (
        "the server could not find the requested resource")  # fmt: skip
    return json.dumps(
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": "NotFound", "details": details, "code": 404}
    ).encode()  # fmt: skip


class NotFoundServer:
    """``with NotFoundServer() as server:`` answers 404 at ``server.url`` until closed."""

    def __init__(self, *, names_object: bool = False) -> None:
        self.requests = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with owner._lock:
                    owner.requests += 1
                body = status(self.path, names_object=names_object)
                self.send_response(404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

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
