"""Run readiness checks concurrently, each bounded by its own deadline.

The one runner for the CLI, the dashboard, the drill's preflight and the Prefect flow:
a caller that wants each check to run some other way (as a Prefect task run, say)
gives a ``CheckCall`` that wraps it, and keeps the deadlines.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from drills import timefmt
from drills.checks.base import CheckContext, CheckResult, CheckSpec, Outcome, Status
from drills.errors import DrillError, TargetError
from drills.notify import Batch, Notice

log = logging.getLogger("drills.checks")


@dataclass(frozen=True)
class ReadinessReport:
    plan: str
    checked_at: dt.datetime
    results: tuple[CheckResult, ...]
    # What changed since the previous stored snapshot, and what became of the messages
    # about it (filled in by run_readiness; a report read back from the store has neither).
    notices: tuple[Notice, ...] = field(default=(), compare=False)
    deliveries: Batch = field(default_factory=Batch, compare=False, repr=False)

    @property
    def blocking(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if r.blocking)

    @property
    def ok(self) -> bool:
        return all(r.status in (Status.PASS, Status.WARN) for r in self.results)

    def to_json(self) -> dict[str, Any]:
        return {
            "plan": self.plan,
            "checked_at": self.checked_at.isoformat(timespec="seconds"),
            "results": [r.to_json() for r in self.results],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReadinessReport:
        return cls(
            plan=data["plan"],
            checked_at=dt.datetime.fromisoformat(data["checked_at"]),
            results=tuple(CheckResult.from_json(r) for r in data["results"]),
        )


# How each check is called: given its spec and a function that runs it, return the
# result. The default calls it in place; the Prefect flow makes each call a task run.
CheckCall = Callable[[CheckSpec, Callable[[], CheckResult]], CheckResult]


def call_in_place(spec: CheckSpec, run: Callable[[], CheckResult]) -> CheckResult:
    return run()


def _result(spec: CheckSpec, outcome: Outcome, duration: float) -> CheckResult:
    return CheckResult(
        id=spec.id,
        title=spec.title,
        category=spec.category,
        status=outcome.status,
        blocking=outcome.blocking,
        summary=outcome.summary,
        evidence=outcome.evidence,
        duration_s=duration,
        remediation=outcome.remediation,
    )


def _error(spec: CheckSpec, cause: str, duration: float) -> CheckResult:
    outcome = Outcome(
        Status.ERROR,
        cause,
        remediation="Make the target reachable from where drills runs (its URL, any proxy or "
        "path prefix in between, its credentials), then re-run the check.",
        blocking=True,  # an unknown state is not a ready state
    )
    return _result(spec, outcome, duration)


def run_one(spec: CheckSpec, context: CheckContext) -> CheckResult:
    started = time.perf_counter()
    try:
        outcome = spec.func(context)
    except TargetError as exc:  # what the check judges could not be read: never a verdict
        return _error(spec, f"cannot read {exc}", time.perf_counter() - started)
    except DrillError as exc:
        return _error(spec, str(exc), time.perf_counter() - started)
    except Exception as exc:  # a buggy check must not sink the whole run
        log.exception("check %s crashed", spec.id)
        cause = f"check crashed: {type(exc).__name__}: {exc}"
        return _error(spec, cause, time.perf_counter() - started)
    return _result(spec, outcome, time.perf_counter() - started)


def _run_called(spec: CheckSpec, context: CheckContext, call: CheckCall) -> CheckResult:
    started = time.perf_counter()
    try:
        return call(spec, lambda: run_one(spec, context))
    except Exception as exc:  # the wrapper failed (its orchestrator went away, say), not the check
        log.exception("check %s could not be run", spec.id)
        cause = f"the check could not be run: {type(exc).__name__}: {exc}"
        return _error(spec, cause, time.perf_counter() - started)


class _Slots:
    """At most ``size`` checks run at once, and each check's deadline starts when it does.

    A check queued behind slow ones has not started, so its deadline has not either: timed
    from the start of the whole run, a check of a few milliseconds queued behind eight
    slow ones timed out without ever running. A check given up at its deadline gives its
    slot back at once, though its thread may still hang: the queue never starves."""

    def __init__(self, size: int) -> None:
        self._free = threading.Semaphore(size)
        self._lock = threading.Lock()
        self._given_back: set[str] = set()
        self.begun: dict[str, float] = {}

    def run(self, spec: CheckSpec, body: Callable[[], CheckResult]) -> CheckResult:
        self._free.acquire()
        self.begun[spec.id] = time.perf_counter()
        try:
            return body()
        finally:
            self.give_back(spec.id)

    def give_back(self, check_id: str) -> None:
        with self._lock:
            if check_id in self._given_back:
                return
            self._given_back.add(check_id)
        self._free.release()

    def deadline(self, spec: CheckSpec) -> float | None:
        begun = self.begun.get(spec.id)
        return None if begun is None else begun + spec.timeout_s

    def expired(self, spec: CheckSpec, now: float) -> bool:
        deadline = self.deadline(spec)
        return deadline is not None and deadline <= now


# How often the runner looks again while some checks wait for a slot.
_QUEUED_POLL_S = 0.2


def run_checks(
    specs: Iterable[CheckSpec],
    context: CheckContext,
    *,
    max_workers: int = 8,
    on_result: Callable[[CheckResult], None] | None = None,
    call: CheckCall = call_in_place,
) -> ReadinessReport:
    """Run the checks, ``max_workers`` at a time; a check past its deadline (counted from
    when it started) is reported as an error."""
    specs = list(specs)
    results: dict[str, CheckResult] = {}
    slots = _Slots(max_workers)
    # A thread for every check, the slots bounding how many run: a hung check holds a
    # thread, never a slot past its deadline.
    pool = ThreadPoolExecutor(max_workers=max(1, len(specs)), thread_name_prefix="check")

    def report(result: CheckResult) -> None:
        results[result.id] = result
        if on_result:
            on_result(result)

    # Each check sees the caller's context variables (a Prefect flow run's, say): a pool
    # thread starts without them.
    futures: dict[Future[CheckResult], CheckSpec] = {
        pool.submit(
            contextvars.copy_context().run, slots.run, spec,
            partial(_run_called, spec, context, call),
        ): spec
        for spec in specs
    }  # fmt: skip
    try:
        pending = set(futures)
        while pending:
            now = time.perf_counter()
            # A check still waiting for a slot has no deadline yet: look again soon.
            soonest = min(slots.deadline(futures[f]) or now + _QUEUED_POLL_S for f in pending)
            done, pending = wait(pending, timeout=max(0.0, soonest - now))
            for future in done:
                report(future.result())
            now = time.perf_counter()
            for future in [f for f in pending if slots.expired(futures[f], now)]:
                spec = futures[future]
                pending.discard(future)
                slots.give_back(spec.id)
                took = spec.timeout_s
                report(_error(spec, f"timed out after {timefmt.duration(took)}", took))
    finally:
        # Don't wait for a hung check: its adapter calls carry their own timeouts.
        pool.shutdown(wait=False, cancel_futures=True)
    ordered = tuple(results[s.id] for s in specs)
    return ReadinessReport(plan=context.plan.name, checked_at=context.now, results=ordered)
