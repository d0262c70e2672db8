"""The HTTP transport: HTTP/1.1 keep-alive, bearer-token auth, chunked watch streams."""

from __future__ import annotations

import contextlib
import hmac
import logging
import select
import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from drills_lab.httpserve import PromptShutdown
from drills_lab.kubeapi.api import HEALTH_PATHS, KubeApi, Reply, Request, WatchRequest
from drills_lab.kubeapi.status import ApiError, unauthorized
from drills_lab.kubeapi.watch import watch_lines

log = logging.getLogger("drills_lab.kubeapi.http")

# An idle keep-alive connection is closed after this long, so a client that
# leaks connections cannot pile up threads forever.
IDLE_TIMEOUT = 300.0


class ApiHTTPServer(PromptShutdown, ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        api: KubeApi,
        token: str | None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(address, ApiHandler)
        if tls is not None:
            # The handshake runs in the connection's thread, not in the accept loop.
            self.socket = tls.wrap_socket(
                self.socket, server_side=True, do_handshake_on_connect=False
            )
        self.api = api
        self.token = token
        self.stopping = threading.Event()
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-request is routine here, not worth a traceback on stderr.
        log.debug("connection from %s failed", client_address, exc_info=True)

    def close_connections(self) -> None:
        """End every open connection, so a stopped server stops answering on keep-alive too."""
        with self._open_lock:
            connections = list(self._open)
        for conn in connections:
            with contextlib.suppress(OSError):  # the peer closed it first
                conn.shutdown(socket.SHUT_RDWR)


class ApiHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Nagle off: otherwise each small response waits ~40 ms for the peer's delayed ACK.
    disable_nagle_algorithm = True
    timeout = IDLE_TIMEOUT
    server: ApiHTTPServer

    def setup(self) -> None:
        super().setup()
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.do_handshake()

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        # The body is read even when the request is refused, e.g. a DELETE's
        # DeleteOptions: unread bytes would be parsed as the next request.
        body = self._read_body()
        if not self._authorized(url.path):
            self._send(Reply(401, unauthorized().to_status()))
            return
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        request = Request(
            method=method,
            path=url.path,
            query=query,
            accept=self.headers.get("Accept") or "application/json",
            content_type=self.headers.get("Content-Type") or "",
            body=body,
            user_agent=self.headers.get("User-Agent") or "",
        )
        try:
            result = self.server.api.handle(request)
        except Exception:
            # As the real server does on a bug: a 500 Status, and the traceback in the log.
            log.exception("%s %s failed", method, url.path)
            result = Reply(500, ApiError(500, "InternalError", "internal error").to_status())
        if isinstance(result, WatchRequest):
            self._stream(result)
        else:
            self._send(result)

    def _authorized(self, path: str) -> bool:
        token = self.server.token
        if token is None or (path.rstrip("/") or "/") in HEALTH_PATHS:
            return True
        sent = (self.headers.get("Authorization") or "").encode()
        return hmac.compare_digest(sent, f"Bearer {token}".encode())

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send(self, reply: Reply) -> None:
        data = reply.encode()
        self.send_response(reply.code)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, watch: WatchRequest) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        try:
            for line in watch_lines(
                self.server.api.store, watch, _stop_check(self.server.stopping, self.connection)
            ):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


def _stop_check(server_stopping: threading.Event, conn: socket.socket) -> Callable[[], bool]:
    """True once the server stops or the watching client has hung up."""

    def should_stop() -> bool:
        if server_stopping.is_set():
            return True
        try:
            readable, _, _ = select.select([conn], [], [], 0)
        except (OSError, ValueError):
            return True
        # A watching client sends nothing: readable means it has closed the connection.
        return bool(readable)

    return should_stop
