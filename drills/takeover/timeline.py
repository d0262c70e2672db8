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

    def to_json(self) -> dict[str, Any]:
        # A copy: the live timeline is written while other threads may still add to it.
        return self._span_json() | {"result": self.result, "evidence": dict(self.evidence)}


@dataclass
class PhaseRecord(_Span):
    steps: list[StepRecord] = field(default_factory=list)
    dry: bool = False  # a dry run's phase: its steps end as "would", not "ok"

    def to_json(self) -> dict[str, Any]:
        return self._span_json() | {"steps": [s.to_json() for s in list(self.steps)]}


Listener = Callable[[str, PhaseRecord, StepRecord | None], None]


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

    def to_json(self) -> list[dict[str, Any]]:
        return [p.to_json() for p in list(self.phases)]
