"""The phase and step timeline of a drill: what ran, when, for how long, with what result."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

# "would": a step of a dry run's phase that changed nothing; "ok" there would read as done.
StepStatus = Literal["running", "ok", "failed", "skipped", "planned", "would"]


def utc_now() -> dt.datetime:
    """The one clock of a run's records: aware, in UTC."""
    return dt.datetime.now(dt.UTC)


@dataclass
class _Span:
    """What a phase and a step have in common: a name, a time span and a status."""

    name: str
    started_at: dt.datetime
    ended_at: dt.datetime | None = None
    status: StepStatus = "running"

    @property
    def seconds(self) -> float:
        end = self.ended_at or utc_now()
        return (end - self.started_at).total_seconds()

    def _span_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "started_at": self.started_at.isoformat(),
            "ended_at": self.ended_at.isoformat() if self.ended_at else None,
            "seconds": round(self.seconds, 3),
            "status": self.status,
        }


@dataclass
class StepRecord(_Span):
    result: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    # A target that did not answer, retried until the phase's deadline: the last wait in
    # words, and how many there were.
    waiting: str = ""
    waits: int = 0

    def to_json(self) -> dict[str, Any]:
        # A copy: the live timeline is written while other threads may still add to it.
        waited = {"waiting": self.waiting, "waits": self.waits} if self.waits else {}
        return self._span_json() | {"result": self.result, "evidence": dict(self.evidence)} | waited


@dataclass
class PhaseRecord(_Span):
    steps: list[StepRecord] = field(default_factory=list)
    dry: bool = False  # a dry run's phase: its steps end as "would", not "ok"

    def to_json(self) -> dict[str, Any]:
        return self._span_json() | {"steps": [s.to_json() for s in list(self.steps)]}


Listener = Callable[[str, PhaseRecord, StepRecord | None], None]
WAIT_TOLD_EVERY_S = 5.0  # a step's waits, told as lines (a log, stderr), at most this often


def every(seconds: float = WAIT_TOLD_EVERY_S) -> Callable[[object], bool]:
    """Whether a line about ``key`` (a step, say) is due: at most once every ``seconds``
    per key, so that a log of waits is not a ticker."""
    last: dict[object, float] = {}

    def due(key: object) -> bool:
        # A step record is mutable (unhashable): it is its own identity.
        k = key if getattr(key, "__hash__", None) is not None else id(key)
        now = time.monotonic()
        if now - last.get(k, float("-inf")) < seconds:
            return False
        last[k] = now
        return True

    return due


class Timeline:
    """Records phases and steps; a listener sees each start and end (live progress, logs)."""

    def __init__(self, listener: Listener | None = None) -> None:
        self.phases: list[PhaseRecord] = []
        self._listener = listener

    def _emit(self, event: str, phase: PhaseRecord, step: StepRecord | None = None) -> None:
        if self._listener is not None:
            self._listener(event, phase, step)

    @property
    def current(self) -> PhaseRecord:
        return self.phases[-1]

    @contextmanager
    def phase(self, name: str, *, dry: bool = False) -> Iterator[PhaseRecord]:
        record = PhaseRecord(name, utc_now(), dry=dry)
        self.phases.append(record)
        self._emit("phase-start", record)
        try:
            yield record
        except BaseException:
            record.status = "failed"
            raise
        else:
            if record.status == "running":
                record.status = "ok"
        finally:
            record.ended_at = utc_now()
            self._emit("phase-end", record)

    @contextmanager
    def step(self, name: str, *, phase: PhaseRecord | None = None) -> Iterator[StepRecord]:
        """A step of the current phase, or of ``phase``: work that goes on beside the
        phases that follow (the readiness of an incident) stays in the phase it began in."""
        phase = phase or self.current
        record = StepRecord(name, utc_now())
        phase.steps.append(record)
        self._emit("step-start", phase, record)
        started = time.perf_counter()
        try:
            yield record
        except BaseException as exc:
            record.status = "failed"
            record.result = record.result or f"{type(exc).__name__}: {exc}"
            raise
        else:
            if phase.dry and record.status in ("running", "planned"):
                record.status = "would"
            elif record.status == "running":
                record.status = "ok"
        finally:
            # Wall-clock ends can go backwards on a clock step; keep the measured length.
            record.ended_at = record.started_at + dt.timedelta(
                seconds=time.perf_counter() - started
            )
            self._emit("step-end", phase, record)

    def waiting(self, step: StepRecord, text: str) -> None:
        """``step`` waits for a target that does not answer: shown live ("step-wait")."""
        step.waiting, step.waits = text, step.waits + 1
        phase = next((p for p in reversed(self.phases) if any(s is step for s in p.steps)), None)
        if phase is not None:
            self._emit("step-wait", phase, step)

    def to_json(self) -> list[dict[str, Any]]:
        return [p.to_json() for p in list(self.phases)]
