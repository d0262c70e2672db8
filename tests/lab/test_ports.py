"""Free ports: from the kernel by default, from DRILLS_PORT_RANGE when it names one."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from drills.errors import LabError
from drills.ports import PORT_RANGE_ENV, free_port


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
