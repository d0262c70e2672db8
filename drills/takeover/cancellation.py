"""Cancelling a run is not a crash: SIGTERM and SIGINT become a clean stop.

A scheduler cancels a flow run, or an orchestrator evicts a pod, with SIGTERM.
Python only turns SIGINT into ``KeyboardInterrupt``; ``on_terminate`` makes
SIGTERM do the same in the main thread, so the drill's own handler rolls back
(drill mode) or stops and reports (incident mode) instead of dying half-way.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

log = logging.getLogger("drills.takeover.cancellation")


class DrillCancelled(KeyboardInterrupt):
    """The run was asked to stop (SIGTERM or SIGINT)."""


class _Handler:
    """Raises once; a second signal must not interrupt the rollback the first one started."""

    def __init__(self) -> None:
        self.cancelled = False

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.cancelled:
            log.warning("received %s again: already cancelling, rollback goes on", name)
            return
        self.cancelled = True
        log.warning("received %s: cancelling the run", name)
        raise DrillCancelled(f"cancelled by {name}")


@contextmanager
def cancel_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT raise ``DrillCancelled`` in the main thread.

    Outside the main thread (where signal handlers cannot be set) it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[signal.Signals, Any] = {}
    handler = _Handler()
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


__all__ = ["DrillCancelled", "cancel_on_signals"]
