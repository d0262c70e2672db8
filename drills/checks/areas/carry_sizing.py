"""Can DR carry the primary's demand? The arithmetic, in one place.

required replicas = ceil(target% × demand ÷ per_replica ÷ (1 − reserve)), and GPUs =
required replicas × GPUs per replica. What DR can give a service is counted by the
readiness check (free and yieldable GPUs on nodes it fits, within its Kueue quota) and
compared here; the drill's scale to demand uses the same replica count, so the two never
disagree.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

from drills.plan.models.demand import ServiceDemand


def replicas_needed(demand: float, spec: ServiceDemand) -> int:
    """Whole replicas that carry ``target_percent`` of ``demand`` within the reserve."""
    exact = spec.target_percent / 100 * demand / spec.per_replica / (1 - spec.reserve)
    # Rounded first, so 3.0000000001 (float noise) does not become 4.
    return math.ceil(round(exact, 9))


def carried_percent(ready: int, demand: float, spec: ServiceDemand) -> float:
    """The part of ``demand`` that ``ready`` replicas carry within their reserve, in percent."""
    if demand <= 0:
        return 100.0
    return ready * spec.per_replica * (1 - spec.reserve) / demand * 100


def formula(demand: float, spec: ServiceDemand, gpus_per_replica: int) -> str:
    """The arithmetic, written out so an SRE can check it."""
    replicas = replicas_needed(demand, spec)
    return (
        f"required = ceil({spec.target_percent:g}% × {demand:.4g} {spec.unit} ÷ "
        f"{spec.per_replica:g} {spec.unit} per replica ÷ (1 − {spec.reserve:g})) = {replicas} "
        f"replicas × {gpus_per_replica} GPU(s) per replica = {replicas * gpus_per_replica} GPUs"
    )


@dataclass(frozen=True)
class ServiceNeed:
    """One service's figure and what DR can give it, as the check gathered them."""

    key: str
    tier: str
    spec: ServiceDemand
    peak: float
    seen_at: float | None
    source: str  # "prometheus" or "static"
    gpus_per_replica: int
    dr_replicas: int
    schedulable_gpus: int  # free and yieldable GPUs on nodes it fits, less the rest of the takeover
    quota_gpus: int | None  # what its Kueue queue admits beyond the rest; None: not queued


@dataclass(frozen=True)
class ServiceCarry:
    need: ServiceNeed
    replicas: int
    gpus: int
    available_gpus: int
    missing_gpus: int

    @property
    def carried(self) -> bool:
        return self.missing_gpus == 0

    def evidence(self) -> dict[str, Any]:
        n = self.need
        seen = (
            dt.datetime.fromtimestamp(n.seen_at, dt.UTC).isoformat(timespec="seconds")
            if n.seen_at is not None
            else None
        )
        return {
            "service": n.key,
            "tier": n.tier,
            "peak": round(n.peak, 4),
            "unit": str(n.spec.unit),
            "seen_at": seen,
            "source": n.source,
            "target_percent": n.spec.target_percent,
            "replicas_needed": self.replicas,
            "dr_replicas": n.dr_replicas,
            "gpus_needed": self.gpus,
            "gpus_available": self.available_gpus,
            "gpus_missing": self.missing_gpus,
            "formula": formula(n.peak, n.spec, n.gpus_per_replica),
        }


def evaluate(needs: list[ServiceNeed]) -> list[ServiceCarry]:
    """Each service against what DR can give it, critical first: GPUs one service is given
    beyond its dr_replicas are not there for the next (counted across the pool, as they
    could land on any node both fit)."""
    claimed = 0
    out: list[ServiceCarry] = []
    for n in sorted(needs, key=lambda n: (n.tier != "critical", n.key)):
        replicas = replicas_needed(n.peak, n.spec)
        gpus = replicas * n.gpus_per_replica
        room = max(0, n.schedulable_gpus - claimed)
        if n.quota_gpus is not None:
            room = min(room, n.quota_gpus)
        # A pod cannot take part of a GPU it asks for whole.
        if n.gpus_per_replica > 0:
            room -= room % n.gpus_per_replica
        missing = max(0, gpus - room)
        claimed += max(0, min(gpus, room) - n.gpus_per_replica * n.dr_replicas)
        out.append(ServiceCarry(n, replicas, gpus, room, missing))
    return out
