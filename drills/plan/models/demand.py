"""The measured demand of the plan's services, and what DR must carry of it.

``demand`` is keyed by workload (``namespace/name``). Each entry says where demand is
measured (a PromQL query, with a static figure as the fallback), what one replica carries
(from the team's load test), the reserve kept free for bursts, and the part of the
primary's demand DR must carry (``target_percent``, AWS ARC's term). `capacity.carry`
sizes DR for the primary's peak of the last 24 h; a drill scales the critical tier to the
demand at T0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Annotated

from pydantic import Field, model_validator

from drills.plan.durations import PositiveDuration
from drills.plan.models.base import PlanModel
from drills.plan.models.workloads import Tier, Workload
from drills.plan.rules import raise_rules
from drills.plan.types import Text

Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class DemandUnit(StrEnum):
    REQUESTS = "requests/s"
    TOKENS = "tokens/s"


class ServiceDemand(PlanModel):
    """One service's demand and what DR must carry of it.

    Replicas DR needs = ceil(target_percent × demand ÷ per_replica ÷ (1 − reserve)).
    """

    query: Annotated[Text, Field(min_length=1, max_length=2000)] | None = None
    """PromQL giving the primary's demand now, one series, in ``unit``; its peak is its
    max_over_time over the last 24 h."""
    static: Positive | None = None
    """The demand in ``unit`` to size for when there is no query; a fallback only where
    given, and the evidence then says so."""
    unit: DemandUnit = DemandUnit.REQUESTS
    """What the query (and the static figure, and per_replica) count: requests/s or
    tokens/s."""
    per_replica: Positive
    """What one replica carries, in ``unit``, from the team's load test."""
    reserve: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)] = 0.3
    """The part of each replica's throughput kept free for bursts (0.3 = 30 %)."""
    target_percent: Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)] = 100.0
    """The part of the primary's demand DR must carry, in percent."""
    resolution: PositiveDuration = 60.0
    """The step at which the look-back evaluates the query (a subquery's step): at most
    the width of the peaks you must not miss."""

    @model_validator(mode="after")
    def _measured_somehow(self) -> ServiceDemand:
        if self.query is None and self.static is None:
            raise_rules("demand", [((), "give query (PromQL), static, or both")])
        return self


Demands = Annotated[dict[str, ServiceDemand], Field(max_length=1000)]


def demand_findings(
    demand: Mapping[str, ServiceDemand], workloads: Iterable[Workload]
) -> list[tuple[tuple[str | int, ...], str, str]]:
    """Warnings (not errors: an application's view of the plan holds only its own workloads)
    for a key that names no critical or normal workload of the plan: it is not sized for."""
    tiers = {w.key: w.tier for w in workloads}
    out: list[tuple[tuple[str | int, ...], str, str]] = []
    for key in demand:
        if key not in tiers:
            message = f"{key} names no workload of the plan (namespace/name): ignored"
            out.append((("demand", key), "demand-unknown-workload", message))
        elif tiers[key] is Tier.BATCH:
            out.append((("demand", key), "demand-batch-workload",
                        f"{key} is batch, which stays paused in a takeover: ignored"))  # fmt: skip
    return out
