"""Named moments where the crash tests kill a drill, to prove recovery from each.

``point(name)`` does nothing unless ``DRILLS_CRASH_AT`` names that moment
(``name``, or ``name#N`` for its Nth occurrence); then the process dies at once
by SIGKILL, as a node failure or an OOM kill would end it: no ``finally``, no
rollback, only what the journal already holds.
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter

ENV = "DRILLS_CRASH_AT"

_seen: Counter[str] = Counter()
_lock = threading.Lock()


def wanted() -> str | None:
    """The crash point asked for, if any."""
    return os.environ.get(ENV) or None


def _matches(target: str, name: str, occurrence: int) -> bool:
    base, sep, nth = target.rpartition("#")
    if sep and nth.isdigit():
        return base == name and int(nth) == occurrence
    return target == name


def point(name: str) -> None:
    """Die by SIGKILL if this is the moment ``DRILLS_CRASH_AT`` names."""
    target = wanted()
    if target is None:
        return
    with _lock:
        _seen[name] += 1
        occurrence = _seen[name]
    if _matches(target, name, occurrence):
        os.kill(os.getpid(), signal.SIGKILL)


__all__ = ["ENV", "point", "wanted"]
