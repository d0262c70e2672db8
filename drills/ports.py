"""Free loopback ports for the servers drills starts (the lab's, and `drills serve`)."""

from __future__ import annotations

import os
import random
import socket
import threading
import time

from drills.errors import LabError

PORT_RANGE_ENV = "DRILLS_PORT_RANGE"

# A port handed out is free until its server binds it, which under load can take a minute:
# meanwhile a second draw in this process (another thread's server, starting at the same
# time) could be given the same port, and one of the two servers would fail to bind.
RECENT_S = 300.0
_recent: dict[int, float] = {}
_recent_lock = threading.Lock()


def _unlock_in_child() -> None:
    # A fork copies the lock as it is: held, if another thread was drawing a port then, and
    # then no thread of the child could ever draw one.
    global _recent_lock
    _recent_lock = threading.Lock()


os.register_at_fork(after_in_child=_unlock_in_child)


def free_port(host: str = "127.0.0.1") -> int:
    """Return a port on ``host`` that is free for both TCP and UDP right now.

    Both protocols matter because ``named`` listens on UDP and TCP on the same port.
    Another process may still take the port before the caller binds it; callers
    start their server soon after. With ``DRILLS_PORT_RANGE=LOW-HIGH`` the port is drawn
    from that range: parallel test workers each get their own, below the kernel's
    ephemeral ports, so no other worker (nor an outgoing connection) takes it meanwhile.
    A port this process handed out in the last RECENT_S seconds is given again only when
    the range has no other free port.
    """
    handed_out_lately: int | None = None
    for _ in range(200):
        port = bindable(host, candidate_port())
        if port is None:
            continue
        if _claim(port):
            return port
        handed_out_lately = port
    if handed_out_lately is not None:
        return handed_out_lately
    raise LabError(f"no free TCP+UDP port on {host}")


def bindable(host: str, port: int) -> int | None:
    """``port`` (0: one the kernel picks) if TCP and UDP can both bind it on ``host`` now,
    else None."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
        try:
            tcp.bind((host, port))
        except OSError:
            return None
        port = int(tcp.getsockname()[1])
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            try:
                udp.bind((host, port))
            except OSError:
                return None
            return port


def _claim(port: int) -> bool:
    """Record ``port`` as handed out; False if this process handed it out lately."""
    now = time.monotonic()
    with _recent_lock:
        for old in [p for p, at in _recent.items() if now - at > RECENT_S]:
            del _recent[old]
        if port in _recent:
            return False
        _recent[port] = now
        return True


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
