"""Retry of temporary target failures: exponential backoff with full jitter, bounded twice.

Adapters call :func:`retry_call` around READ calls and idempotent writes only (a
merge patch to a value, an RFC 2136 replace, a Route 53 UPSERT): retrying a write
that may have landed is safe only when landing twice changes nothing.

Every retry loop of :func:`retry_call` is bounded by a number of attempts *and* a total
deadline, so a flapping target costs a readiness check at most ``deadline_s`` (plus the
one attempt under way). A takeover's phases wrap their calls in :func:`retry_until`
instead: the same backoff, no count, only the phase's own deadline, each wait shown.
:class:`PermanentError` is never retried. :class:`TimedOut` is not retried by
default: a server that hung once for a whole read timeout will most likely hang
again, and retrying would multiply the operator's wait by the number of attempts.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from drills.errors import TemporaryError

log = logging.getLogger("drills.targets.retry")

T = TypeVar("T")

_EXHAUSTED = "_drills_retries_exhausted"


class TimedOut(TemporaryError):  # noqa: N818 - reads as what happened
    """A connect or read timeout ran out: the target may be hung rather than flapping."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry a temporary failure.

    The n-th wait (n from 0) is uniform in ``[0, min(max_delay_s, base_delay_s * 2**n)]``
    (AWS's "full jitter", so clients that failed together do not retry together), but
    never shorter than the error's own ``delay`` (a server's Retry-After). A server that
    asks for more than ``max_delay_s`` is not retried here: the error goes up with its
    ``delay`` for a caller with a longer horizon to honour.
    """

    attempts: int = 3
    base_delay_s: float = 0.1
    max_delay_s: float = 2.0
    deadline_s: float = 15.0
    retry_timeouts: bool = False

    def with_(self, **changes: float | int | bool) -> RetryPolicy:
        return replace(self, **changes)  # type: ignore[arg-type]

    def backoff(self, attempt: int, hint: float, draw: Callable[[], float]) -> float:
        ceiling = min(self.max_delay_s, self.base_delay_s * 2**attempt)
        return max(hint, draw() * ceiling)


DEFAULT_POLICY = RetryPolicy()


def retry_call(
    fn: Callable[[], T],
    *,
    policy: RetryPolicy = DEFAULT_POLICY,
    sleep: Callable[[float], None] = time.sleep,
    draw: Callable[[], float] = random.random,
) -> T:
    """``fn()``, retried on :class:`TemporaryError` as ``policy`` allows.

    The last error is raised when the attempts or the deadline run out, its cause
    extended by how many attempts were made, so the operator sees it was retried.
    """
    started = time.monotonic()
    attempt = 0
    while True:
        try:
            return fn()
        except TemporaryError as exc:
            attempt += 1
            if getattr(exc, _EXHAUSTED, False):
                raise  # an inner retry already gave up: nesting must not multiply attempts
            if isinstance(exc, TimedOut) and not policy.retry_timeouts:
                raise
            if exc.delay > policy.max_delay_s:
                raise
            wait = policy.backoff(attempt - 1, exc.delay, draw)
            spent = time.monotonic() - started
            if attempt >= policy.attempts or spent + wait >= policy.deadline_s:
                if attempt == 1:
                    raise
                cause = f"{exc.cause} (gave up after {attempt} attempts in {spent:.1f}s)"
                final = _same_kind(exc, cause)
                setattr(final, _EXHAUSTED, True)
                raise final from exc
            log.info(
                "%s: %s; retry %d/%d in %.2fs",
                exc.target,
                exc.cause,
                attempt,
                policy.attempts - 1,
                wait,
            )
            sleep(wait)


def _same_kind(exc: TemporaryError, cause: str) -> TemporaryError:
    """``exc`` again with a new cause; a subclass of another signature falls back."""
    try:
        return type(exc)(exc.target, cause, delay=exc.delay)
    except TypeError:
        return TemporaryError(exc.target, cause, delay=exc.delay)


# -- retries until a deadline: a takeover's phases ----------------------------------------
# A phase of a takeover has a deadline of its own (a tier's, the DNS switch's): a target
# that blips inside it must cost a wait, never the phase. Waits grow to this at most, so a
# target that comes back is seen again within it.
PHASE_POLICY = RetryPolicy(attempts=0, base_delay_s=0.25, max_delay_s=2.0, retry_timeouts=True)


@dataclass(frozen=True)
class Waiting:
    """One wait of :func:`retry_until`, as it is shown to the operator."""

    target: str
    cause: str
    failing_s: float  # since the first failure of this call
    until: dt.datetime  # when the retries stop: the phase's deadline, on the wall clock
    next_in_s: float
    attempt: int

    def describe(self) -> str:
        return (
            f"{self.target}: {self.cause}; failing for {self.failing_s:.0f} s; "
            f"retrying until {self.until:%H:%M:%S} UTC"
        )


def retry_until(
    fn: Callable[[], T],
    *,
    deadline: float,
    on_wait: Callable[[Waiting], None] | None = None,
    stop: threading.Event | None = None,
    policy: RetryPolicy = PHASE_POLICY,
    draw: Callable[[], float] = random.random,
) -> T:
    """``fn()``, retried on every :class:`TemporaryError` (timeouts and errors an
    adapter's own retries gave up on included) until ``deadline`` (``time.monotonic()``).

    No count of attempts: only the deadline, the phase's own, ends the retries. Each wait
    is told to ``on_wait`` first. The last error is raised at the deadline, or at once when
    ``stop`` is set (the run is being cancelled), its cause saying how long it was retried.
    A :class:`PermanentError` is never retried.
    """
    first_failure: float | None = None
    attempt = 0
    while True:
        try:
            return fn()
        except TemporaryError as exc:
            now = time.monotonic()
            first_failure = now if first_failure is None else first_failure
            attempt += 1
            wait = policy.backoff(min(attempt - 1, 16), min(exc.delay, policy.max_delay_s), draw)
            wait = max(wait, policy.base_delay_s / 2)  # never a busy loop on a refusal
            if now >= deadline or (stop is not None and stop.is_set()):
                if attempt == 1 and now >= deadline:
                    raise
                spent = now - first_failure
                cause = f"{exc.cause} (retried {attempt} times for {spent:.0f}s, to the deadline)"
                final = _same_kind(exc, cause)
                setattr(final, _EXHAUSTED, True)
                raise final from exc
            # A backoff that would pass the deadline is cut to it, and one last attempt made
            # there: giving up as soon as the next wait would not fit ended a phase up to a
            # whole backoff before its deadline.
            wait = min(wait, deadline - now)
            until = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=deadline - now)
            waiting = Waiting(exc.target, exc.cause, now - first_failure, until, wait, attempt)
            if on_wait is not None:
                on_wait(waiting)
            else:
                log.warning("%s", waiting.describe())
            if stop is not None:
                stop.wait(wait)
            else:
                time.sleep(wait)
