"""The forecast itself: a point and an interval for RTO, client-visible RTO and full
capacity, the phase and workload that dominate, and what it is based on.

With past drills: each past run's RTO, adjusted for what differs now (a workload already
warm at DR costs no rollout), weighted toward the most recent run (the DR pool changes:
the latest drill says most about the next), within the spread of the runs widened for
their small number. Without: a stated model of each phase, with DR's rollout speed from
the sentinel's last pod start when there is one. Capacity that is not there now (queue
quota, free GPUs) means no takeover started now would complete, and the forecast says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from drills.forecast.samples import RTO_PHASES, WINDOW_DAYS, RunSample
from drills.forecast.state import CurrentState
from drills.plan import DrillPlan

# The widening of the runs' spread: a base for the noise of any one run, and more the fewer
# runs there are; plus two seconds either way (probe and scheduling jitter), so runs of a few
# seconds keep a real interval.
BASE_MARGIN = 0.15
FEW_RUNS_MARGIN = 0.35
ABSOLUTE_MARGIN_S = 2.0
RECENCY = 0.5  # each older run weighs half the next newer one

# The stated model without history: (low, point, high) seconds per phase. The low ends
# are what a control plane next door does (an API call each): the interval must hold a
# first drill however fast its sites are.
MODEL_PHASES: dict[str, tuple[float, float, float]] = {
    "fence": (0.0, 5.0, 20.0),
    "dns": (0.0, 5.0, 20.0),
    "smoke": (0.0, 2.0, 10.0),
}
MODEL_ROLLOUT = (15.0, 60.0, 180.0)  # one tier, when nothing at DR says how fast pods start
POD_START_SPREAD = (1.0, 4.0)  # a tier takes 1-4 times the sentinel's pod start, …
POD_START_EXTRA_S = 10.0  # … plus up to this for image pulls and model loading
# Kubernetes stamps creation and Ready in whole seconds, so a pod start read from them is off
# by up to a second either way: a 0.2 s start across a second's edge reads as 1 s.
STAMP_RESOLUTION_S = 1.0


@dataclass(frozen=True)
class Interval:
    low: float
    point: float
    high: float

    def to_json(self) -> dict[str, float]:
        return {"low": round(self.low, 1), "point": round(self.point, 1),
                "high": round(self.high, 1)}  # fmt: skip


@dataclass(frozen=True)
class Forecast:
    rto: Interval
    client_rto: Interval
    full_capacity: Interval | None
    target_s: float
    dominant_phase: str | None
    dominant_workload: str | None
    basis: str
    drills: int
    completes: bool
    state: CurrentState
    phases: Mapping[str, float] = field(default_factory=dict)
    # Within the bring-up: how long the critical tier waited for DR's low-priority work to
    # give its GPUs back, in the runs that measured it.
    preemption: Interval | None = None
    # Until DR ran the replicas that carry target_percent of the primary's demand, in the
    # runs that carried it (a run that did not is no sample of how long carrying takes).
    carry: Interval | None = None

    @property
    def verified(self) -> bool:
        """Every input of the state now was read: otherwise the figures rest on guesses."""
        return self.state.verified

    @property
    def above_target(self) -> bool:
        return self.rto.point > self.target_s

    @property
    def certainly_above(self) -> bool:
        """Every point of the interval is above the target."""
        return self.rto.low > self.target_s

    def to_json(self) -> dict[str, Any]:
        s = self.state
        return {
            "rto_seconds": round(self.rto.point, 1),
            "interval": [round(self.rto.low, 1), round(self.rto.high, 1)],
            "client_rto_seconds": round(self.client_rto.point, 1),
            "client_interval": [round(self.client_rto.low, 1), round(self.client_rto.high, 1)],
            "full_capacity_seconds": round(self.full_capacity.point, 1)
            if self.full_capacity else None,
            "full_capacity_interval": [round(self.full_capacity.low, 1),
                                       round(self.full_capacity.high, 1)]
            if self.full_capacity else None,
            "rto_target_seconds": self.target_s,
            "dominant_phase": self.dominant_phase,
            "dominant_workload": self.dominant_workload,
            "phases": {k: round(v, 1) for k, v in self.phases.items()},
            "preemption_seconds": round(self.preemption.point, 1) if self.preemption else None,
            "preemption_interval": [round(self.preemption.low, 1),
                                    round(self.preemption.high, 1)]
            if self.preemption else None,
            "carry_seconds": round(self.carry.point, 1) if self.carry else None,
            "carry_interval": [round(self.carry.low, 1), round(self.carry.high, 1)]
            if self.carry else None,
            "basis": self.basis,
            "drills": self.drills,
            "completes": self.completes,
            "verified": self.verified,
            "unreadable": list(s.unreadable),
            "blocked_by": list(s.blocked_by),
            "state": {"warm": sorted(s.warm), "dns_ttl_seconds": s.dns_ttl_s,
                      "pod_start_seconds": s.pod_start_s,
                      "replication_lag_seconds": s.replication_lag_s, "notes": list(s.notes)},
        }  # fmt: skip


def _weights(n: int) -> list[float]:
    raw = [RECENCY**i for i in range(n)]
    return [w / sum(raw) for w in raw]


def _spread(values: Sequence[float], weights: Sequence[float]) -> Interval:
    """Recency-weighted point within the runs' spread, widened for how few they are."""
    point = sum(v * w for v, w in zip(values, weights, strict=True))
    margin = BASE_MARGIN + FEW_RUNS_MARGIN / len(values)
    low = max(0.0, min(values) * (1 - margin) - ABSOLUTE_MARGIN_S)
    high = max(values) * (1 + margin) + ABSOLUTE_MARGIN_S
    return Interval(low, point, high)


def _tier_time(
    workloads: Mapping[str, tuple[str, float]], tier: str, warm: frozenset[str]
) -> tuple[float, float]:
    """The tier's bring-up then (its slowest workload), and now (warm ones left out)."""
    times = [(key, secs) for key, (t, secs) in workloads.items() if t == tier]
    was = max((secs for _, secs in times), default=0.0)
    now = max((secs for key, secs in times if key not in warm), default=0.0)
    return was, now


def _saved(sample: RunSample, warm: frozenset[str]) -> tuple[float, float]:
    """Seconds of this run's bring-up that warm workloads would save now: (RTO, full capacity).

    A tier takes as long as its slowest workload; warm ones drop out of that maximum.
    """
    saved = {}
    for tier in ("critical", "normal"):
        was, now = _tier_time(sample.workloads, tier, warm)
        saved[tier] = was - now
    # The normal tier comes up after the DNS switch and the smoke probe, so only the
    # critical tier's time is in the RTO; runs recorded when both tiers came up before the
    # switch (their full capacity before DNS answered) had the normal tier's in it too.
    before_dns = (
        sample.dns_done_s is not None
        and sample.full_capacity_s is not None
        and sample.full_capacity_s <= sample.dns_done_s
    )
    rto_saved = saved["critical"] + (saved["normal"] if before_dns else 0.0)
    return rto_saved, saved["critical"] + saved["normal"]


def _dominant(samples: Sequence[RunSample], weights: Sequence[float], warm: frozenset[str]
              ) -> tuple[dict[str, float], str | None, str | None]:  # fmt: skip
    phases: dict[str, float] = {}
    workloads: dict[str, float] = {}
    for sample, w in zip(samples, weights, strict=True):
        for name, secs in sample.phases.items():
            phases[name] = phases.get(name, 0.0) + secs * w
        for key, (_, secs) in sample.workloads.items():
            if key not in warm:
                workloads[key] = workloads.get(key, 0.0) + secs * w
    ordered = {p: phases[p] for p in RTO_PHASES if p in phases}
    phase = max(ordered, key=ordered.__getitem__) if ordered else None
    workload = max(workloads, key=workloads.__getitem__) if workloads else None
    return ordered, phase, workload


def _from_history(plan: DrillPlan, samples: Sequence[RunSample], state: CurrentState) -> Forecast:
    weights = _weights(len(samples))
    rtos, clients, fulls = [], [], []
    ttl = state.dns_ttl_s or 0.0
    for sample in samples:
        rto_saved, full_saved = _saved(sample, state.warm)
        rto = max(0.0, sample.rto_s - rto_saved)
        rtos.append(rto)
        dns_done = sample.dns_done_s if sample.dns_done_s is not None else rto
        clients.append(max(rto, dns_done - rto_saved + ttl))
        if sample.full_capacity_s is not None:
            fulls.append(max(0.0, sample.full_capacity_s - full_saved))
    phases, phase, workload = _dominant(samples, weights, state.warm)
    newest, oldest = samples[0].started_at, samples[-1].started_at
    days = max(1, (newest - oldest).days + 1)
    basis = (f"{len(samples)} drill{'s' if len(samples) != 1 else ''}; the last "
             f"{min(days, WINDOW_DAYS)} day{'s' if days != 1 else ''} (of a {WINDOW_DAYS}-day "
             "window), the newest weighted most; adjusted for the state now")  # fmt: skip
    full_weights = _weights(len(fulls))
    preempted = [s.preemption_s for s in samples if s.preemption_s is not None]
    carried = [s.carry_s for s in samples if s.carry_s is not None]
    return Forecast(
        rto=_spread(rtos, weights),
        client_rto=_spread(clients, weights),
        full_capacity=_spread(fulls, full_weights) if fulls else None,
        target_s=plan.objectives.rto,
        dominant_phase=phase,
        dominant_workload=workload,
        basis=basis,
        drills=len(samples),
        completes=not state.blocked_by,
        state=state,
        phases=phases,
        preemption=_spread(preempted, _weights(len(preempted))) if preempted else None,
        carry=_spread(carried, _weights(len(carried))) if carried else None,
    )


def _rollout(state: CurrentState) -> tuple[float, float, float]:
    if state.pod_start_s is None:
        return MODEL_ROLLOUT
    start = state.pod_start_s
    low, high = POD_START_SPREAD
    fastest, slowest = max(0.0, start - STAMP_RESOLUTION_S), start + STAMP_RESOLUTION_S
    return fastest * low, max(start, 1.0) * (low + high) / 2, slowest * high + POD_START_EXTRA_S


def _dns_phase(plan: DrillPlan) -> tuple[float, float, float]:
    """The stated DNS phase; a controller that applies the switch on its own schedule
    (external-dns's ``sync_interval``) adds up to one interval, half of it on average."""
    low, point, high = MODEL_PHASES["dns"]
    wait = float(getattr(plan.dns, "sync_interval", 0.0))
    return low, point + wait / 2, high + wait


def _from_model(plan: DrillPlan, state: CurrentState) -> Forecast:
    rollout = _rollout(state)
    dns = _dns_phase(plan)
    cold = {
        t: any(w.key not in state.warm and w.dr_replicas > 0 for w in plan.workloads_in(t))
        for t in ("critical", "normal")
    }
    # The RTO: fence, the critical tier, DNS, the smoke probe; the normal tier follows.
    parts = {**MODEL_PHASES, "dns": dns, **({"bring-up": rollout} if cold["critical"] else {})}
    total = [sum(p[i] for p in parts.values()) for i in range(3)]
    to_dns = [total[i] - MODEL_PHASES["smoke"][i] for i in range(3)]
    normal = rollout if cold["normal"] else (0.0, 0.0, 0.0)
    full = [total[i] + normal[i] for i in range(3)]
    ttl = state.dns_ttl_s or 0.0
    how = ("each tier 1-4x the DR sentinel's last pod start "
           f"({state.pod_start_s:.0f} s, ±{STAMP_RESOLUTION_S:.0f} s) plus up to "
           f"{POD_START_EXTRA_S:.0f} s"
           if state.pod_start_s is not None
           else f"each tier {MODEL_ROLLOUT[0]:.0f}-{MODEL_ROLLOUT[2]:.0f} s")  # fmt: skip
    basis = (
        f"no drills in the last {WINDOW_DAYS} days: a stated model, not history — fence "
        f"0-20 s, {how}, DNS {dns[0]:.0f}-{dns[2]:.0f} s, smoke 0-10 s"
    )
    phases = {name: p[1] for name, p in parts.items()}
    return Forecast(
        rto=Interval(*total),
        client_rto=Interval(*(max(total[i], to_dns[i] + ttl) for i in range(3))),
        full_capacity=Interval(*full),
        target_s=plan.objectives.rto,
        dominant_phase=max(phases, key=phases.__getitem__),
        dominant_workload=None, basis=basis, drills=0, completes=not state.blocked_by,
        state=state, phases=phases,
    )  # fmt: skip


def forecast(plan: DrillPlan, samples: Sequence[RunSample], state: CurrentState) -> Forecast:
    """The forecast for a takeover of ``plan`` started now; ``samples`` newest first."""
    if samples:
        return _from_history(plan, samples, state)
    return _from_model(plan, state)


def forecast_error(
    predicted: Mapping[str, Any] | None, measured_rto: float
) -> dict[str, Any] | None:
    """How far a stored forecast was from the measured RTO, and whether its interval held it."""
    if not predicted or predicted.get("rto_seconds") is None:
        return None
    low, high = (predicted.get("interval") or [None, None])[:2]
    inside = low is not None and high is not None and low <= measured_rto <= high
    return {"error_seconds": round(measured_rto - float(predicted["rto_seconds"]), 1),
            "inside_interval": inside}  # fmt: skip


__all__ = ["Forecast", "Interval", "forecast", "forecast_error"]
