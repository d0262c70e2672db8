"""`drills metrics serve` as a server: a burst of scrapes all answered, and a `name[]`
filter either honoured or refused, never answered with an empty page."""

from __future__ import annotations

import os
import selectors
import socket
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from drills.store.history import HistoryStore
from drills_lab.procs import ManagedProcess, free_port

# A burst of connections against the listen queue, timed: serial.
pytestmark = pytest.mark.serial

BURST = 200
# Linux retransmits a SYN the listen queue had no room for after 1 s: a connection made
# sooner found room at once.
FIRST_SYN_RETRY_S = 1.0


@pytest.fixture(scope="module")
def exporter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("metrics-server")
    db = f"sqlite:///{tmp / 'history.db'}"
    HistoryStore(db).close()
    port = free_port()
    argv = [sys.executable, "-m", "drills", "metrics", "serve", "--port", str(port), "--db", db,
            "--plans", str(tmp / "no-plan-*.yaml")]  # fmt: skip
    process = ManagedProcess("metrics", argv, log_path=tmp / "metrics.log", env=dict(os.environ))
    address = f"127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return httpx.get(f"http://{address}/metrics", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    process.start(ready, timeout=60)
    try:
        yield address
    finally:
        process.stop()


def _connect_all(host: str, port: int) -> tuple[list[socket.socket], float]:
    """Open BURST connections at once; the sockets, and the seconds until all were made."""
    selector = selectors.DefaultSelector()
    socks = []
    began = time.monotonic()
    for _ in range(BURST):
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex((host, port))
        socks.append(sock)
        selector.register(sock, selectors.EVENT_WRITE)
    pending = set(socks)
    while pending and time.monotonic() - began < 30:
        for key, _ in selector.select(timeout=0.1):
            selector.unregister(key.fileobj)
            pending.discard(key.fileobj)  # type: ignore[arg-type]
    assert not pending, f"{len(pending)} of {BURST} connections never made"
    selector.close()
    return socks, time.monotonic() - began


def _answers(socks: list[socket.socket], request: bytes, deadline_s: float) -> list[bytes]:
    """Send ``request`` on every socket, then read every answer to its end."""
    selector = selectors.DefaultSelector()
    received: dict[socket.socket, bytearray] = {}
    for sock in socks:
        sock.setblocking(True)
        sock.sendall(request)
        sock.setblocking(False)
        received[sock] = bytearray()
        selector.register(sock, selectors.EVENT_READ)
    open_ = set(socks)
    end = time.monotonic() + deadline_s
    while open_ and time.monotonic() < end:
        for key, _ in selector.select(timeout=0.5):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            chunk = sock.recv(65536)
            if chunk:
                received[sock] += chunk
            else:
                selector.unregister(sock)
                open_.discard(sock)
                sock.close()
    selector.close()
    for sock in open_:
        sock.close()
    return [bytes(received[sock]) for sock in socks]


def test_a_burst_of_200_simultaneous_scrapes_is_all_answered(exporter: str) -> None:
    host, _, port = exporter.partition(":")
    socks, took = _connect_all(host, int(port))
    # Every handshake completed within the listen backlog: none waited for a SYN retry.
    assert took < FIRST_SYN_RETRY_S, f"connecting took {took:.2f}s: the listen queue overflowed"
    answers = _answers(socks, b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n", deadline_s=180)
    ok = [a for a in answers if a.startswith(b"HTTP/1.0 200") and b"drills_plan_files_invalid" in a]
    assert len(ok) == BURST, f"{len(ok)} of {BURST} scrapes answered; first other: " + next(
        (repr(a[:200]) for a in answers if a not in ok), ""
    )


def test_a_name_filter_is_honoured_or_refused_never_empty(exporter: str) -> None:
    base = f"http://{exporter}/metrics"
    one = httpx.get(base, params={"name[]": "drills_plan_files_invalid"}, timeout=30)
    assert one.status_code == 200
    names = {line.split()[0] for line in one.text.splitlines() if not line.startswith("#")}
    assert names == {"drills_plan_files_invalid"}, one.text
    for asked in ("", "drills_no_such_metric"):
        refused = httpx.get(base, params={"name[]": asked}, timeout=30)
        assert refused.status_code == 400, refused.text
        assert f"name[] {asked!r} names no metric of drills" in refused.text
    everything = httpx.get(base, timeout=30)
    assert (
        everything.status_code == 200
        and "drills_metrics_scrape_duration_seconds" in everything.text
    )
