"""The plan's SLOs after the switch: each must be OK within the RTO target, counted from T0,
and stay OK for its hold (as Resilience Hub judges a recovery test).

Every SLO is read from Prometheus's HTTP API at an interval fitted to its hold. An answer
that cannot be trusted is never a value: an SLO whose reads keep failing is `unverified`.
A single failed read (a blip) is recorded and read again.
"""

from __future__ import annotations

import datetime as dt
import operator
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from drills.errors import TargetError
from drills.plan import Slo
from drills.targets.prometheus_api import instant_value
from drills.timefmt import duration

COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}  # fmt: skip
# Reads that fail in a row before an SLO is unverified: one lost answer is not an outage.
FAILED_READS = 3
MIN_INTERVAL_S, MAX_INTERVAL_S = 0.5, 15.0
KEPT_VALUES = 120  # values kept for the report, the last ones


def interval_for(slo: Slo) -> float:
    """About 30 reads over the hold, between MIN_INTERVAL_S and MAX_INTERVAL_S."""
    return min(max(slo.hold / 30.0, MIN_INTERVAL_S), MAX_INTERVAL_S)


@dataclass
class SloResult:
    name: str
    expr: str
    op: str
    threshold: float
    hold_s: float
    required: bool
    # waiting, then holding; at the end held, breached, unverified, or stopped (the run
    # stopped first: another SLO failed the drill, or a phase did)
    status: str = "waiting"
    detail: str = ""
    first_ok_at: dt.datetime | None = None
    first_ok_s: float | None = None  # after T0
    held_s: float = 0.0
    last_value: float | None = None
    reads: int = 0
    failed_reads: int = 0
    breaches: list[dict[str, Any]] = field(default_factory=list)
    values: list[tuple[float, float]] = field(default_factory=list)  # (s after T0, value)

    @property
    def fails_drill(self) -> bool:
        return self.status == "breached" or (self.status == "unverified" and self.required)

    def line(self) -> str:
        """One line a person reads: what happened to this SLO, and why."""
        rule = f"{self.op} {self.threshold:g}"
        if self.status == "held":
            return (
                f"SLO {self.name}: held ({rule}) for {duration(self.hold_s)}, OK "
                f"{duration(self.first_ok_s)} after T0, last value {self.last_value:g}"
            )
        if self.status == "unverified":
            optional = "" if self.required else " (required: false, reported only)"
            return f"SLO {self.name}: unverified{optional}: {self.detail}"
        if self.status == "stopped":
            return f"SLO {self.name}: not decided: {self.detail}"
        return f"SLO {self.name}: breached ({rule}): {self.detail}"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "expr": self.expr, "op": self.op, "threshold": self.threshold,
            "hold_seconds": self.hold_s, "required": self.required, "status": self.status,
            "detail": self.detail, "line": self.line(),
            "first_ok_at": self.first_ok_at.isoformat() if self.first_ok_at else None,
            "first_ok_seconds": None if self.first_ok_s is None else round(self.first_ok_s, 3),
            "held_seconds": round(self.held_s, 3), "last_value": self.last_value,
            "reads": self.reads, "failed_reads": self.failed_reads,
            "breaches": self.breaches,
            "values": [[round(t, 3), v] for t, v in self.values[-KEPT_VALUES:]],
        }  # fmt: skip


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def watch_one(
    slo: Slo, url: str, t0: dt.datetime, rto_s: float, stop: threading.Event | None = None
) -> SloResult:
    """Read ``slo`` until it has held, breached or cannot be verified. It must first be OK
    by T0 + ``rto_s``; from then on one value outside its threshold is a breach."""
    result = SloResult(slo.name, slo.expr, slo.op, slo.threshold, slo.hold, slo.required)
    ok_by = t0 + dt.timedelta(seconds=rto_s)
    compare, interval = COMPARE[slo.op], interval_for(slo)
    stopped = stop or threading.Event()
    failures = 0
    while True:
        now = _now()
        try:
            value = instant_value(url, slo.expr)
        except TargetError as exc:
            failures += 1
            result.failed_reads += 1
            if failures >= FAILED_READS:
                result.status, result.detail = "unverified", f"Prometheus: {exc}"
                return result
        else:
            failures = 0
            result.reads += 1
            result.last_value = value
            result.values.append(((now - t0).total_seconds(), value))
            if _judge(result, compare(value, slo.threshold), value, now, t0, ok_by):
                return result
        if result.status == "waiting" and _now() > ok_by:
            result.status = "breached"
            result.detail = (
                f"not OK within the RTO target ({duration(rto_s)} after T0); "
                f"last value {_shown(result.last_value)}"
            )
            return result
        if stopped.wait(interval):
            result.status, result.detail = "stopped", "stopped before it was decided"
            return result


def _judge(
    result: SloResult, ok: bool, value: float, now: dt.datetime, t0: dt.datetime,
    ok_by: dt.datetime,
) -> bool:  # fmt: skip
    """Record one value; True when the SLO is decided."""
    if result.first_ok_at is None:
        if not ok or now > ok_by:
            return False  # not yet (the deadline is judged by the caller)
        result.first_ok_at, result.status = now, "holding"
        result.first_ok_s = (now - t0).total_seconds()
    held = (now - result.first_ok_at).total_seconds()
    result.held_s = held
    if not ok:
        result.breaches.append({"at": now.isoformat(), "value": value})
        result.status = "breached"
        result.detail = f"{value:g} after {duration(held)} of its {duration(result.hold_s)} hold"
        return True
    if held >= result.hold_s:
        result.status = "held"
        return True
    return False


def _shown(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def watch(
    slos: tuple[Slo, ...], url: str, t0: dt.datetime, rto_s: float,
    stop: threading.Event | None = None, *, stop_on_failure: bool = False,
) -> list[SloResult]:  # fmt: skip
    """Every SLO at once, each at its own interval. With ``stop_on_failure`` (a drill),
    the first SLO that fails the drill stops the others: the rollback need not wait for
    their holds."""
    if not slos:
        return []
    stopped = stop or threading.Event()

    def one(slo: Slo) -> SloResult:
        result = watch_one(slo, url, t0, rto_s, stopped)
        if stop_on_failure and result.fails_drill:
            stopped.set()
        return result

    with ThreadPoolExecutor(len(slos), "slo") as pool:
        return list(pool.map(one, slos))


def unverified_all(slos: tuple[Slo, ...], why: str) -> list[SloResult]:
    """Every SLO unverified for one reason (no Prometheus to ask)."""
    results = [SloResult(s.name, s.expr, s.op, s.threshold, s.hold, s.required) for s in slos]
    for r in results:
        r.status, r.detail = "unverified", why
    return results
