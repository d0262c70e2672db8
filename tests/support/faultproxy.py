"""Fault-injecting proxies for tests: real services made to misbehave on demand.

:class:`FaultProxy` sits on loopback TCP between drills and a real service and
relays bytes, unless told to add latency, reset connections (RST, via SO_LINGER 0),
answer the next N HTTP requests with an error status, swallow every connection
(blackhole), or stall: hold every byte of every connection, open ones too, until
released (a server stopped, as SIGSTOP stops it). With ``http=True`` it parses just
enough HTTP/1.1 (request head and Content-Length body) to count requests and to answer
some of them itself; without it, it relays any protocol, TLS included, and counts
connections only.

:class:`UdpFaultProxy` does the same for DNS over UDP: pass, drop the next N
datagrams, garble or shorten the next N answers, or drop everything.

Modes switch at runtime, thread-safely; each takes effect from the next connection,
request or datagram on.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

log = logging.getLogger("drills.tests.support.faultproxy")

_CHUNK = 65536
_REASONS = {401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 503: "Service Unavailable"}


def _nodelay(sock: socket.socket) -> None:
    # Without it each small write waits ~40 ms for the peer's delayed ACK.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def reset(sock: socket.socket) -> None:
    """Close with an RST instead of a FIN: the peer sees "connection reset by peer"."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@dataclass
class Counters:
    connections: int = 0
    requests: int = 0  # HTTP requests seen (http=True only), answered or forwarded
    forwarded: int = 0  # HTTP requests passed to the upstream
    injected: int = 0  # HTTP requests the proxy answered itself
    resets: int = 0
    blackholed: int = 0


class FaultProxy:
    """A TCP proxy on ``host`` in front of ``upstream`` (``"host:port"``)."""

    def __init__(self, upstream: str, *, http: bool = False, host: str = "127.0.0.1") -> None:
        up_host, _, up_port = upstream.rpartition(":")
        self.upstream = (up_host, int(up_port))
        self.http = http
        self.counters = Counters()
        self._lock = threading.Lock()
        self._latency = 0.0
        self._resets_left = 0
        self._statuses: list[int] = []
        self._blackhole = False
        self._flowing = threading.Event()  # cleared while stalled
        self._flowing.set()
        self._stop = threading.Event()
        self._open: set[socket.socket] = set()
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, 0))
        self._listener.listen(128)
        self._thread = threading.Thread(target=self._accept, name="faultproxy", daemon=True)
        self._thread.start()

    # -- modes -------------------------------------------------------------------------
    @property
    def address(self) -> str:
        host, port = self._listener.getsockname()[:2]
        return f"{host}:{port}"

    def pass_through(self) -> None:
        with self._lock:
            self._latency, self._resets_left, self._statuses = 0.0, 0, []
            self._blackhole = False
        self._flowing.set()

    def stall(self) -> None:
        """Hold every byte both ways, on open connections too, until ``pass_through``:
        connections stay up and silent, and what was held flows on once released."""
        self._flowing.clear()

    def _wait_flowing(self) -> None:
        while not self._flowing.wait(0.1) and not self._stop.is_set():
            pass

    def latency(self, seconds: float) -> None:
        """Delay every chunk the upstream sends back by ``seconds``."""
        with self._lock:
            self._latency = seconds

    def reset_next(self, count: int) -> None:
        """RST the next ``count`` connections as soon as the client sends anything."""
        with self._lock:
            self._resets_left = count

    def answer_next(self, count: int, status: int = 503) -> None:
        """Answer the next ``count`` HTTP requests with ``status`` instead of forwarding them."""
        if not self.http:
            raise ValueError("answer_next needs http=True")
        with self._lock:
            self._statuses = [status] * count

    def blackhole(self) -> None:
        """Accept new connections and never answer: a hung server."""
        with self._lock:
            self._blackhole = True

    # -- lifecycle ---------------------------------------------------------------------
    def close(self) -> None:
        self._stop.set()
        self._flowing.set()
        self._listener.close()
        with self._lock:
            held, self._open = list(self._open), set()
        for sock in held:
            _close(sock)
        self._thread.join(2)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- relaying ----------------------------------------------------------------------
    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)

    def _accept(self) -> None:
        while not self._stop.is_set():
            # A closed listener does not wake a blocked accept(): look every so often. close()
            # may close it between the loop's check and the select.
            try:
                ready, _, _ = select.select([self._listener], [], [], 0.1)
            except (OSError, ValueError):
                return
            if not ready:
                continue
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            client.setblocking(True)
            _nodelay(client)
            self._track(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with self._lock:
            self.counters.connections += 1
            hole = self._blackhole
            rst = self._resets_left > 0
            if rst:
                self._resets_left -= 1
        if hole:
            with self._lock:
                self.counters.blackholed += 1
            self._drain(client)  # read and drop, so the client's writes never block
            return
        if rst:
            client.settimeout(5)
            with contextlib.suppress(OSError):
                client.recv(_CHUNK)
            with self._lock:
                self.counters.resets += 1
            reset(client)
            return
        try:
            upstream = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            reset(client)
            return
        upstream.settimeout(None)
        _nodelay(upstream)
        self._track(upstream)
        back = threading.Thread(target=self._relay_back, args=(upstream, client), daemon=True)
        back.start()
        try:
            if self.http:
                self._forward_http(client, upstream)
            else:
                self._forward_raw(client, upstream)
        finally:
            _close(upstream)
            _close(client)

    def _drain(self, client: socket.socket) -> None:
        try:
            while not self._stop.is_set() and client.recv(_CHUNK):
                pass
        except OSError:
            pass

    def _forward_raw(self, client: socket.socket, upstream: socket.socket) -> None:
        try:
            while data := client.recv(_CHUNK):
                self._wait_flowing()
                upstream.sendall(data)
        except OSError:
            pass

    def _relay_back(self, upstream: socket.socket, client: socket.socket) -> None:
        try:
            while data := upstream.recv(_CHUNK):
                with self._lock:
                    delay = self._latency
                if delay:
                    time.sleep(delay)
                self._wait_flowing()
                client.sendall(data)
        except OSError:
            pass
        finally:
            _close(client)

    def _forward_http(self, client: socket.socket, upstream: socket.socket) -> None:
        """Forward one request at a time, answering some of them here instead."""
        buffer = b""
        try:
            while True:
                request, buffer = _read_request(client, buffer)
                if request is None:
                    return
                with self._lock:
                    self.counters.requests += 1
                    status = self._statuses.pop(0) if self._statuses else None
                    if status is None:
                        self.counters.forwarded += 1
                    else:
                        self.counters.injected += 1
                if status is not None:
                    reason = _REASONS.get(status, "Injected")
                    client.sendall(
                        f"HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\n"
                        "Connection: close\r\n\r\n".encode()
                    )
                    return
                self._wait_flowing()
                upstream.sendall(request)
        except OSError:
            return


def _read_request(client: socket.socket, buffer: bytes) -> tuple[bytes | None, bytes]:
    """One whole HTTP/1.1 request (head and Content-Length body) and what follows it."""
    while b"\r\n\r\n" not in buffer:
        data = client.recv(_CHUNK)
        if not data:
            return None, buffer
        buffer += data
    head, _, rest = buffer.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        data = client.recv(_CHUNK)
        if not data:
            return None, b""
        rest += data
    return head + b"\r\n\r\n" + rest[:length], rest[length:]


UdpMode = Literal["pass", "drop", "short", "garble", "blackhole"]


class UdpFaultProxy:
    """A UDP proxy for DNS: each query goes to ``upstream`` from a socket of its own."""

    def __init__(self, upstream: str, *, host: str = "127.0.0.1", port: int = 0) -> None:
        """``port``: the one to listen on (0, any free one), such as a TCP proxy's, so that
        one ``host:port`` serves a DNS client's UDP queries and its TCP updates."""
        up_host, _, up_port = upstream.rpartition(":")
        self.upstream = (up_host, int(up_port))
        self.datagrams = 0
        self.answered = 0
        self._lock = threading.Lock()
        self._mode: UdpMode = "pass"
        self._left = 0  # how many datagrams the mode applies to; then back to "pass"
        self._stop = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind((host, port))
        self._thread = threading.Thread(target=self._loop, name="udpfaultproxy", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        host, port = self._sock.getsockname()[:2]
        return f"{host}:{port}"

    def set(self, mode: UdpMode, count: int = 1) -> None:
        """Apply ``mode`` to the next ``count`` datagrams ("blackhole" to all of them)."""
        with self._lock:
            self._mode, self._left = mode, count

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        self._thread.join(2)

    def __enter__(self) -> UdpFaultProxy:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _next_mode(self) -> UdpMode:
        with self._lock:
            self.datagrams += 1
            mode = self._mode
            if mode not in ("pass", "blackhole"):
                self._left -= 1
                if self._left <= 0:
                    self._mode = "pass"
            return mode

    def _loop(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._sock], [], [], 0.2)
            if not ready:
                continue
            try:
                data, client = self._sock.recvfrom(_CHUNK)
            except OSError:
                return
            mode = self._next_mode()
            if mode in ("drop", "blackhole"):
                continue
            args = (data, client, _SPOILERS.get(mode, _keep))
            threading.Thread(target=self._answer, args=args, daemon=True).start()

    def _answer(
        self, query: bytes, client: tuple[str, int], spoil: Callable[[bytes], bytes]
    ) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as out:
            out.settimeout(3)
            try:
                out.sendto(query, self.upstream)
                reply, _ = out.recvfrom(_CHUNK)
                self._sock.sendto(spoil(reply), client)
            except OSError:
                return
        with self._lock:
            self.answered += 1


def _keep(reply: bytes) -> bytes:
    return reply


def _short(reply: bytes) -> bytes:
    return reply[:7]  # shorter than the 12-byte DNS header


def _garble(reply: bytes) -> bytes:
    # The header (id, flags, counts) stays, so the answer matches the query; the
    # records it announces are garbage.
    return reply[:12] + bytes(b ^ 0xA5 for b in reply[12:])


_SPOILERS: dict[str, Callable[[bytes], bytes]] = {"short": _short, "garble": _garble}
