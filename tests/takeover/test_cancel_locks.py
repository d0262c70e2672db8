"""A cancel is raised in drills' own code, never half-way through a library's lock.

SIGTERM or SIGINT can come between a lock's acquire and the ``try`` that releases it, as in
``threading.Condition.__enter__`` (SQLAlchemy's connection pool waits on one). Raised there,
it left the lock held, and the cancelled drill's rollback then waited on it for ever: its
store write and the lease's heartbeat both blocked on the pool's lock, which the main thread
held (seen after Ctrl-C on `make test`, in a `drills run` of the crash matrix).
"""

from __future__ import annotations

import random
import signal
import threading
import time

import pytest

from drills.takeover.cancellation import DEFER_LIMIT_S, DrillCancelled, cancel_on_signals

CANCELS = 100  # on the old handler, some four in ten of them left the lock held


def sigterm_to_the_main_thread(after: float) -> threading.Timer:
    main = threading.main_thread().ident
    assert main is not None
    sender = threading.Timer(after, signal.pthread_kill, (main, signal.SIGTERM))
    sender.start()
    return sender


def test_a_cancel_never_leaves_a_library_lock_held() -> None:
    lock = threading.Lock()
    condition = threading.Condition(lock)  # its __enter__ is Python: the window is in it
    left_held = 0
    for _ in range(CANCELS):
        with pytest.raises(DrillCancelled), cancel_on_signals():
            sender = sigterm_to_the_main_thread(after=random.uniform(0.001, 0.005))
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                with condition:
                    pass
            raise AssertionError("the SIGTERM never cancelled")
        sender.join()
        if not lock.acquire(blocking=False):
            left_held += 1
        lock.release()
    assert left_held == 0, f"{left_held} of {CANCELS} cancels left the lock held"


def test_a_cancel_that_finds_a_long_library_call_comes_within_the_limit() -> None:
    """An Event's wait holds no lock half-way: after the limit, the cancel is raised in it."""
    started = time.monotonic()
    with pytest.raises(DrillCancelled), cancel_on_signals():
        sigterm_to_the_main_thread(after=0.1)
        threading.Event().wait(30)
    took = time.monotonic() - started
    assert 0.1 + DEFER_LIMIT_S <= took < 0.1 + DEFER_LIMIT_S + 3, took


def test_a_cancel_in_drills_own_wait_is_raised_at_once() -> None:
    started = time.monotonic()
    with pytest.raises(DrillCancelled), cancel_on_signals():
        sigterm_to_the_main_thread(after=0.1)
        time.sleep(30)  # the sleeping frame is this test's: no library's lock is in play
    assert time.monotonic() - started < 0.1 + DEFER_LIMIT_S, "the cancel was deferred"
