"""A threaded HTTP server tuned for loopback: Nagle off, keep-alive on, and a serving loop
that sleeps until a connection comes."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# path → (status, body, content type)
Respond = Callable[[str], tuple[int, bytes, str]]

# socketserver's loop wakes every poll interval (0.5 s by default) only to see whether
# shutdown() was called. A lab runs a dozen such loops, and tens of labs run in a test
# session: so they sleep until a connection comes, and shutdown() wakes them with one.
IDLE_POLL_S = 30.0


def shutdown_waking(server: socketserver.BaseServer, shutdown: Callable[[], None]) -> None:
    """``shutdown()`` (the server's own) at once: it asks the loop to stop and waits for it,
    and a connection to the server wakes the loop to see the request."""
    stopper = threading.Thread(target=shutdown, name="shutdown", daemon=True)
    stopper.start()
    address = server.server_address
    assert isinstance(address, tuple)  # an INET server's (host, port)
    while stopper.is_alive():
        with contextlib.suppress(OSError):
            socket.create_connection((address[0], address[1]), timeout=1).close()
        stopper.join(0.05)


class PromptShutdown(socketserver.BaseServer):
    """A mixin: serve_forever polls every IDLE_POLL_S, and shutdown() returns at once."""

    def serve_forever(self, poll_interval: float = IDLE_POLL_S) -> None:
        super().serve_forever(poll_interval)

    def shutdown(self) -> None:
        shutdown_waking(self, super().shutdown)


class FastHTTPServer(PromptShutdown, ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default backlog of 5 drops the SYNs of a burst of new connections
    # (a load probe's), which the clients then resend a second later: latency of the lab's
    # kernel queue, not of the site it models.
    request_queue_size = 128

    def get_request(self) -> tuple[socket.socket, object]:
        conn, addr = super().get_request()
        # Without this, every small response waits ~40 ms for the peer's delayed ACK.
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, addr


def serve_in_thread(
    host: str, port: int, handler: type[BaseHTTPRequestHandler], name: str
) -> tuple[FastHTTPServer, threading.Thread]:
    server = FastHTTPServer((host, port), handler)
    thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
    thread.start()
    return server, thread


def get_handler(respond: Respond) -> type[BaseHTTPRequestHandler]:
    """A keep-alive handler of GET that answers what ``respond`` gives, and logs nothing
    (a scrape or a probe a second would drown the lab's log)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            status, body, kind = respond(self.path)
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler
