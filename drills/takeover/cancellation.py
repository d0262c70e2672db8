"""Cancelling a run is not a crash: SIGTERM and SIGINT become a clean stop.

A scheduler cancels a flow run, or an orchestrator evicts a pod, with SIGTERM.
Python only turns SIGINT into ``KeyboardInterrupt``; ``on_terminate`` makes
SIGTERM do the same in the main thread, so the drill's own handler rolls back
(drill mode) or stops and reports (incident mode) instead of dying half-way.

``cancel_run`` is the same stop asked for from inside the process: a run that lost
its plan's lease (drills.takeover.lease) must not go on changing what another may
now be recovering.

The stop is raised in drills' own code, never in a library's. A signal can come
between a lock's acquire and the ``try`` that releases it: in ``threading.Condition``
(SQLAlchemy's connection pool waits on one), in ``logging``'s handlers. Raised there,
it leaves the lock held, and the rollback then waits on it for ever. So when the
signal finds the main thread in the standard library or an installed package, the
handler lets that call go on and has the signal sent again a moment later; after
``DEFER_LIMIT_S`` of that (a call that long waits, it does not hold a lock half-way),
it raises wherever it is.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sysconfig
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

log = logging.getLogger("drills.takeover.cancellation")


class DrillCancelled(KeyboardInterrupt):
    """The run was asked to stop (SIGTERM or SIGINT)."""


class LeaseLost(DrillCancelled):
    """The run lost its plan's lease: it stops as a cancelled run does."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(args or ("stopped: the run lost its plan's lease",)))


RESEND_S = 0.02
DEFER_LIMIT_S = 0.5
_OWN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")
_LIBRARIES = tuple(
    {
        os.path.join(path, "")
        for key, path in sysconfig.get_paths().items()
        if key in ("stdlib", "platstdlib", "purelib", "platlib")
    }
)


def in_library(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs the standard library's or an installed package's code
    (drills' own, even installed, is not)."""
    if frame is None:
        return False
    path = frame.f_code.co_filename
    if path.startswith("<"):  # frozen modules and generated code: the libraries'
        return True
    return path.startswith(_LIBRARIES) and not path.startswith(_OWN)


class _Handler:
    """Raises once, in drills' own code; a second signal must not interrupt the rollback the
    first one started.

    The signal is sent again by a thread of its own: the handler itself takes no lock and
    starts no thread, since the code it interrupted may hold those of ``threading``."""

    def __init__(self) -> None:
        self.cancelled = False
        self.closed = False  # the block ended: a signal sent again is dropped
        self.reason: str | None = None  # set by cancel_run: why the process signals itself
        self._deferred_since: float | None = None
        self._signum = signal.SIGTERM
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)  # the handler must never wait on it
        self._resender = threading.Thread(
            target=self._resend, name="drills-cancel-resend", daemon=True
        )
        self._resender.start()

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.closed:
            return
        if self.cancelled:
            log.warning("received %s again: already cancelling, rollback goes on", name)
            return
        now = time.monotonic()
        if self._deferred_since is None:
            self._deferred_since = now
        if in_library(frame) and now - self._deferred_since < DEFER_LIMIT_S:
            self._signum = signal.Signals(signum)
            with contextlib.suppress(BlockingIOError):  # a wake-up already waits
                os.write(self._wake_w, b".")
            return
        self.cancelled = True
        if self.reason is not None:
            raise LeaseLost(self.reason)
        log.warning("received %s: cancelling the run", name)
        raise DrillCancelled(f"cancelled by {name}")

    def _resend(self) -> None:
        main = threading.main_thread().ident
        assert main is not None
        while os.read(self._wake_r, 1) and not self.closed:
            time.sleep(RESEND_S)
            if not self.closed:
                signal.pthread_kill(main, self._signum)

    def close(self) -> None:
        """Before the previous handlers are back: a signal the thread sends is still ours."""
        self.closed = True
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_w, b".")
        self._resender.join()
        os.close(self._wake_r)
        os.close(self._wake_w)


_active: _Handler | None = None  # the handler of the cancel_on_signals block in force


@contextmanager
def cancel_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT raise ``DrillCancelled`` in the main thread.

    Outside the main thread (where signal handlers cannot be set) it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    global _active
    previous: dict[signal.Signals, Any] = {}
    handler, outer = _Handler(), _active
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous[sig] = signal.signal(sig, handler)
    _active = handler
    try:
        yield
    finally:
        _active = outer
        handler.close()
        for sig, earlier in previous.items():
            signal.signal(sig, earlier)


def cancel_run(thread_id: int, reason: str) -> None:
    """Stop the run going on in thread ``thread_id`` as a cancel would, saying ``reason``.

    In the main thread under ``cancel_on_signals``, by the same SIGTERM a scheduler sends
    (it also wakes a wait on a lock or a future). Elsewhere, by raising ``LeaseLost`` in
    that thread, which it meets at its next Python instruction.
    """
    handler = _active
    if handler is not None and thread_id == threading.main_thread().ident:
        handler.reason = reason
        signal.pthread_kill(thread_id, signal.SIGTERM)
        return
    raised = ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(LeaseLost)
    )
    if raised != 1:
        log.error("could not stop the run's thread %d (%s)", thread_id, reason)


class LeaseStop:
    """Whether a lost lease may still stop a run. While the run goes forward it does; once
    the run stops (rolls back, completes forward, records), nothing may interrupt that."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.thread_id = threading.get_ident()  # the run's thread: set again when it starts
        self._forward = False
        self._lock = threading.Lock()

    def going_forward(self, forward: bool) -> bool:
        """Set whether the run goes forward; returns whether it did."""
        with self._lock:
            was, self._forward = self._forward, forward
        return was

    def lost(self, why: str) -> None:
        """Called by the lease's heartbeat: stop the run as a cancel does (a drill rolls
        back, an incident stops and reports), before another host recovers it."""
        if self.going_forward(False):
            cancel_run(self.thread_id, why)
        else:
            log.error("run %s: %s; it is already stopping", self.run_id, why)


__all__ = ["DrillCancelled", "LeaseLost", "LeaseStop", "cancel_on_signals", "cancel_run"]
