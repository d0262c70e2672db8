"""Real notification receivers on loopback: an HTTP server for Apprise's ``json://`` and an
SMTP server (aiosmtpd) for ``mailto://``. Each keeps every message it got, raw."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from drills_lab.procs import free_port


@dataclass
class Received:
    raw: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, data: bytes) -> None:
        with self.lock:
            self.raw.append(data)

    def count(self) -> int:
        with self.lock:
            return len(self.raw)

    def wait_for(self, n: int, timeout: float = 15.0) -> list[bytes]:
        """The first ``n`` messages, waiting at most ``timeout`` s for them to arrive."""
        end = time.monotonic() + timeout
        while self.count() < n and time.monotonic() < end:
            time.sleep(0.05)
        with self.lock:
            return list(self.raw)


@dataclass
class JsonReceiver(Received):
    port: int = 0

    def url(self, path: str = "hook", auth: str = "") -> str:
        return f"json://{auth}127.0.0.1:{self.port}/{path}"

    def messages(self) -> list[dict[str, Any]]:
        with self.lock:
            return [json.loads(body) for body in self.raw]


@contextmanager
def json_receiver() -> Iterator[JsonReceiver]:
    """An HTTP server that keeps every POST body and answers 200."""
    received = JsonReceiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            received.add(body)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    received.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class SmtpReceiver(Received):
    port: int = 0

    def url(self) -> str:
        # mailto:// (not mailtos://) is plain SMTP: Apprise's "insecure" mode, no TLS.
        return f"mailto://127.0.0.1:{self.port}?from=drills@example.test&to=sre@example.test"


@contextmanager
def smtp_receiver() -> Iterator[SmtpReceiver]:
    """aiosmtpd on a free loopback port, keeping each message's content."""
    from aiosmtpd.controller import Controller

    received = SmtpReceiver(port=free_port())

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
            received.add(bytes(envelope.original_content or envelope.content))
            return "250 OK"

    controller = Controller(Handler(), hostname="127.0.0.1", port=received.port)
    controller.start()
    try:
        yield received
    finally:
        controller.stop()
