"""Free loopback ports for the servers drills starts (the lab's, and `drills serve`)."""

from __future__ import annotations

import os
import random
import socket

from drills.errors import LabError

PORT_RANGE_ENV = "DRILLS_PORT_RANGE"


def free_port(host: str = "127.0.0.1") -> int:
    """Return a port on ``host`` that is free for both TCP and UDP right now.

    Both protocols matter because ``named`` listens on UDP and TCP on the same port.
    Another process may still take the port before the caller binds it; callers
    start their server soon after. With ``DRILLS_PORT_RANGE=LOW-HIGH`` the port is drawn
    from that range: parallel test workers each get their own, below the kernel's
    ephemeral ports, so no other worker (nor an outgoing connection) takes it meanwhile.
    """
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
            try:
                tcp.bind((host, candidate_port()))
            except OSError:
                continue
            port = int(tcp.getsockname()[1])
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                try:
                    udp.bind((host, port))
                except OSError:
                    continue
                return port
    raise LabError(f"no free TCP+UDP port on {host}")


def candidate_port() -> int:
    """0 (the kernel picks) unless DRILLS_PORT_RANGE names a range to draw from."""
    spec = os.environ.get(PORT_RANGE_ENV, "")
    if not spec:
        return 0
    try:
        low, high = (int(part) for part in spec.split("-", 1))
    except ValueError:
        raise LabError(f"{PORT_RANGE_ENV}={spec!r}: expected LOW-HIGH, e.g. 20000-21999") from None
    if not 1024 <= low <= high <= 65535:
        raise LabError(f"{PORT_RANGE_ENV}={spec!r}: expected 1024 <= LOW <= HIGH <= 65535")
    return random.randint(low, high)
