"""Free ports: from the kernel by default, from DRILLS_PORT_RANGE when it names one."""

from __future__ import annotations

import os
import signal
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from drills import ports
from drills.errors import LabError
from drills.ports import PORT_RANGE_ENV, free_port

# Between the test workers' ranges (20000-31999, tests/conftest.py) and the kernel's
# ephemeral ports: no server of the suite, and no outgoing connection, uses these.
_SPARE_LOW = 32100


def test_a_range_is_kept_and_the_port_is_free_on_tcp_and_udp(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(PORT_RANGE_ENV, "23000-23099")
    ports = {free_port() for _ in range(20)}
    assert all(23000 <= port <= 23099 for port in ports)
    port = ports.pop()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp, socket.socket() as tcp:
        udp.bind(("127.0.0.1", port))
        tcp.bind(("127.0.0.1", port))


def test_a_taken_port_is_never_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """A range of one port, held: never given, whatever else the machine has open (its
    neighbour, in a range of two, could be any process's outgoing connection)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        monkeypatch.setenv(PORT_RANGE_ENV, f"{taken}-{taken}")
        with pytest.raises(LabError, match=r"no free TCP\+UDP port"):
            free_port()


@pytest.mark.parametrize("spec", ["20000", "b-c", "30000-20000", "80-90", "65000-70000"])
def test_a_bad_range_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, spec: str) -> None:
    monkeypatch.setenv(PORT_RANGE_ENV, spec)
    with pytest.raises(LabError, match=PORT_RANGE_ENV):
        free_port()


def test_without_a_range_the_kernel_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PORT_RANGE_ENV, raising=False)
    ephemeral = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    low, high = (int(p) for p in ephemeral)
    assert low <= free_port() <= high


def test_ports_drawn_at_once_are_all_different(monkeypatch: pytest.MonkeyPatch) -> None:
    """Servers that start together (the lab's, in threads) each draw a port before any of
    them binds: the draws must not meet, even in a small range."""
    monkeypatch.setenv(PORT_RANGE_ENV, f"{_SPARE_LOW}-{_SPARE_LOW + 39}")
    with ThreadPoolExecutor(max_workers=8) as pool:
        drawn = list(pool.map(lambda _: free_port(), range(30)))
    assert len(set(drawn)) == 30
    assert all(_SPARE_LOW <= port <= _SPARE_LOW + 39 for port in drawn)


def test_a_small_range_gives_a_port_again_rather_than_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A range of two free ports, asked five times: the draws after the second are given
    one of the two again (a server that stopped may have freed it), never an error."""
    low = next(
        port
        for port in range(_SPARE_LOW + 100, _SPARE_LOW + 200)
        if ports.bindable("127.0.0.1", port) and ports.bindable("127.0.0.1", port + 1)
    )
    monkeypatch.setenv(PORT_RANGE_ENV, f"{low}-{low + 1}")
    first, second = free_port(), free_port()
    assert {first, second} == {low, low + 1}
    assert all(free_port() in {low, low + 1} for _ in range(3))


def test_a_child_forked_while_a_port_is_drawn_can_draw_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fork server and the crash matrix fork processes that draw ports: a child forked
    while another thread held the draw's lock must not wait on it forever."""
    monkeypatch.setenv(PORT_RANGE_ENV, f"{_SPARE_LOW + 300}-{_SPARE_LOW + 399}")
    with ports._recent_lock:
        child = os.fork()
        if child == 0:  # the child: draw, and report by exit code, whatever happens
            signal.alarm(10)  # a child stuck on the lock is killed by SIGALRM
            code = 2
            try:
                code = 0 if _SPARE_LOW + 300 <= free_port() <= _SPARE_LOW + 399 else 1
            finally:
                os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
