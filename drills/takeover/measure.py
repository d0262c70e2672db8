"""RTO, client-visible RTO, time to full capacity and RPO of a takeover, and the verdict.

The RTO is the service restored (the critical tier up, DNS switched, smoke through the
name); full capacity comes later, when the normal tier is ready. The verdict is on the RTO.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from drills.checks.runner import ReadinessReport
from drills.plan import DrillPlan
from drills.store.details import MeasurementRecord
from drills.store.kinds import Verdict
from drills.timefmt import duration


@dataclass(frozen=True)
class Measurement:
    t0: dt.datetime
    restored: dt.datetime
    dns_switched: dt.datetime
    full_capacity: dt.datetime
    old_ttl: float
    rto_seconds: float
    client_rto_seconds: float
    full_capacity_seconds: float
    rpo_seconds: dict[str, float | None]
    rto_target: float
    rpo_target: float
    verdict: Verdict  # met or missed
    preemption_seconds: float | None = None  # the GPUs taken back at DR; None: not measured
    # Until DR ran the replicas that carry target_percent of the primary's demand at T0;
    # None: not carried (or the plan measures no demand). ``capacity`` says which.
    carry_seconds: float | None = None
    capacity: dict[str, Any] | None = None

    def summary(self) -> str:
        rpo = max((v for v in self.rpo_seconds.values() if v is not None), default=0.0)
        return (
            f"RTO {duration(self.rto_seconds)} (target {duration(self.rto_target)}), "
            f"client-visible {duration(self.client_rto_seconds)}, "
            f"full capacity {duration(self.full_capacity_seconds)}, "
            f"worst RPO {duration(rpo)} (target {duration(self.rpo_target)})"
            + (f", {self.capacity['summary']}" if self.capacity else "")
            + f": {self.verdict}"
        )

    def record(self) -> MeasurementRecord:
        """As the run's details keep it."""
        return MeasurementRecord(
            t0=self.t0,
            restored=self.restored,
            dns_switched=self.dns_switched,
            full_capacity=self.full_capacity,
            old_ttl_seconds=self.old_ttl,
            rto_seconds=round(self.rto_seconds, 3),
            client_rto_seconds=round(self.client_rto_seconds, 3),
            full_capacity_seconds=round(self.full_capacity_seconds, 3),
            preemption_seconds=self.preemption_seconds,
            rpo_seconds=self.rpo_seconds,
            rto_target_seconds=self.rto_target,
            rpo_target_seconds=self.rpo_target,
            verdict=self.verdict,
            carry_seconds=None if self.carry_seconds is None else round(self.carry_seconds, 3),
            capacity=self.capacity,
        )

    def to_json(self) -> dict[str, Any]:
        return self.record().model_dump(mode="json")


def rpo_at_t0(plan: DrillPlan, readiness: ReadinessReport | None) -> dict[str, float | None]:
    """Per dataset: the replication lag the preflight measured at DR just before T0.

    That is the age of the oldest primary write not yet readable at DR (0 when DR
    holds everything): the window of writes a takeover at T0 would lose.
    """
    lags: dict[str, float | None] = {d.name: None for d in plan.datasets}
    if readiness is None:
        return lags
    for result in readiness.results:
        if result.id != "data.rpo":
            continue
        for entry in result.evidence.get("datasets", ()):
            name, lag = entry.get("name"), entry.get("lag_s")
            if name in lags and lag is not None:
                lags[name] = float(lag)
    return lags


def measure(
    plan: DrillPlan,
    *,
    t0: dt.datetime,
    restored: dt.datetime,
    dns_switched: dt.datetime,
    full_capacity: dt.datetime,
    old_ttl: float,
    readiness: ReadinessReport | None,
    preemption_seconds: float | None = None,
    carried: dt.datetime | None = None,
    capacity: dict[str, Any] | None = None,
) -> Measurement:
    rto = (restored - t0).total_seconds()
    # Clients may hold the old answer for a TTL after the switch.
    client_restored = max(restored, dns_switched + dt.timedelta(seconds=old_ttl))
    client_rto = (client_restored - t0).total_seconds()
    rpo = rpo_at_t0(plan, readiness)
    known = [v for v in rpo.values() if v is not None]
    met = rto <= plan.objectives.rto and all(v <= plan.objectives.rpo for v in known)
    if len(known) < len(rpo):
        met = False  # an unmeasured RPO is not a met one
    if capacity is not None and not capacity.get("carried"):
        met = False  # DR answers, but does not carry the target of the primary's demand
    return Measurement(
        t0=t0,
        restored=restored,
        dns_switched=dns_switched,
        full_capacity=full_capacity,
        old_ttl=old_ttl,
        rto_seconds=rto,
        client_rto_seconds=client_rto,
        full_capacity_seconds=(full_capacity - t0).total_seconds(),
        rpo_seconds=rpo,
        rto_target=plan.objectives.rto,
        rpo_target=plan.objectives.rpo,
        verdict=Verdict.MET if met else Verdict.MISSED,
        preemption_seconds=preemption_seconds,
        carry_seconds=(carried - t0).total_seconds() if carried is not None else None,
        capacity=capacity,
    )


def measure_facts(
    plan: DrillPlan, t0: dt.datetime, facts: dict[str, Any], readiness: ReadinessReport | None
) -> Measurement:
    """The measurement from a takeover's facts, as its phases record them: DNS and full
    capacity default to the restore when a run (completed by recover) did not record them."""
    restored: dt.datetime = facts["restored_at"]
    return measure(
        plan, t0=t0, restored=restored,
        dns_switched=facts.get("dns_switched_at", restored),
        full_capacity=facts.get("full_capacity_at", restored),
        old_ttl=float(facts.get("old_ttl", 0)), readiness=readiness,
        preemption_seconds=facts.get("preemption_seconds"),
        carried=facts.get("carry_at"), capacity=facts.get("capacity"),
    )  # fmt: skip
