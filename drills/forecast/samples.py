"""Past drills as the forecast reads them: per-phase and per-workload durations from each
run's stored timeline, measured from T0."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus
from drills.store.models import DrillRun

# The phases between T0 and the service answering at DR: what the RTO is made of.
RTO_PHASES = ("declare", "approve", "fence", "bring-up", "dns", "smoke")
# The bring-up steps are named "TIER: NAMESPACE/NAME → REPLICAS".
_TIER_STEP = re.compile(r"^(critical|normal): (\S+) → \d+$")
WINDOW_DAYS = 90
MAX_SAMPLES = 10


@dataclass(frozen=True)
class RunSample:
    run_id: str
    started_at: dt.datetime
    rto_s: float
    phases: Mapping[str, float]  # seconds per phase of RTO_PHASES present
    workloads: Mapping[str, tuple[str, float]]  # key → (tier, seconds to Ready)
    dns_done_s: float | None  # seconds from T0 until DNS answered DR everywhere
    full_capacity_s: float | None  # seconds from T0 until the last tier was Ready
    forecast: Mapping[str, Any] | None = None  # what was forecast before it ran
    preemption_s: float | None = None  # GPUs taken back from DR's low-priority work
    carry_s: float | None = None  # until DR ran the replicas that carry the demand's target


def _when(text: Any) -> dt.datetime | None:
    if not text:
        return None
    when = dt.datetime.fromisoformat(str(text))
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def _since(t0: dt.datetime, text: Any) -> float | None:
    when = _when(text)
    return (when - t0).total_seconds() if when else None


def _steps(
    phases: Iterable[Mapping[str, Any]], t0: dt.datetime
) -> tuple[dict[str, Any], list[float]]:
    """Per-workload rollout times, and when each tier step ended (seconds from T0)."""
    workloads: dict[str, tuple[str, float]] = {}
    ends: list[float] = []
    for phase in phases:
        for step in phase.get("steps") or []:
            match = _TIER_STEP.match(str(step.get("name", "")))
            if match and step.get("status") == "ok":
                workloads[match.group(2)] = (match.group(1), float(step.get("seconds") or 0.0))
                end = _since(t0, step.get("ended_at"))
                if end is not None:
                    ends.append(end)
    return workloads, ends


def sample_of(run: DrillRun) -> RunSample | None:
    """The run as a sample, or None when it has no measured RTO to learn from."""
    measurement = run.details.measurement
    t0 = run.t0 or (measurement.t0 if measurement else None)
    if run.rto_seconds is None or t0 is None:
        return None
    t0 = t0 if t0.tzinfo else t0.replace(tzinfo=dt.UTC)
    phases = {p["name"]: float(p.get("seconds") or 0.0) for p in run.timeline or []
              if p.get("name") in RTO_PHASES}  # fmt: skip
    dns = next((p for p in run.timeline or [] if p.get("name") == "dns"), None)
    workloads, ends = _steps(run.timeline or [], t0)
    full = run.details.full_capacity_seconds
    recorded = run.details.forecast
    started = run.started_at if run.started_at.tzinfo else run.started_at.replace(tzinfo=dt.UTC)
    return RunSample(
        run_id=run.id,
        started_at=started,
        rto_s=float(run.rto_seconds),
        phases=phases,
        workloads=workloads,
        dns_done_s=_since(t0, dns.get("ended_at")) if dns else None,
        full_capacity_s=float(full) if full is not None else (max(ends) if ends else None),
        forecast=recorded.model_dump(mode="json") if recorded is not None else None,
        preemption_s=run.preemption_seconds,
        carry_s=run.carry_seconds,
    )


def recent_samples(
    history: HistoryStore, plan: str, now: dt.datetime, *, window_days: int = WINDOW_DAYS
) -> list[RunSample]:
    """The plan's successful real drills of the last ``window_days``, newest first."""
    since = now - dt.timedelta(days=window_days)
    samples = []
    for run in history.list_runs(plan=plan, mode=Mode.DRILL.value, limit=MAX_SAMPLES * 3):
        if run.dry_run or not RunStatus(run.status).succeeded:
            continue
        started = run.started_at if run.started_at.tzinfo else run.started_at.replace(tzinfo=dt.UTC)
        if started < since:
            break
        sample = sample_of(run)
        if sample is not None:
            samples.append(sample)
        if len(samples) == MAX_SAMPLES:
            break
    return samples
