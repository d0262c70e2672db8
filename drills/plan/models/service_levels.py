"""What must hold after the switch: SLOs read from Prometheus, and a load probe through the
public name. A drill is not met unless both hold; an incident only reports them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictBool

from drills.plan.durations import PositiveDuration
from drills.plan.models.base import PlanModel
from drills.plan.types import HttpUrl, ShortText, Text

Comparison = Literal["<", "<=", ">", ">="]


class Slo(PlanModel):
    """One SLO: a PromQL expression that must compare true against its threshold, within
    the RTO target after the switch, and stay so for its hold."""

    name: ShortText
    """The SLO's name, in reports, metrics and notices."""
    expr: Annotated[Text, Field(min_length=1, max_length=4000)]
    """A PromQL expression that returns one sample (aggregate it: `sum(...)`, `max(...)`);
    checked by Prometheus's own parser before the run (readiness check slo.valid)."""
    op: Comparison
    """How the value compares with the threshold for the SLO to be OK."""
    threshold: Annotated[float, Field(allow_inf_nan=False)]
    """The value the expression is compared with."""
    hold: PositiveDuration = 300.0
    """How long the SLO must stay OK once it is, such as 5m."""
    required: StrictBool = True
    """An SLO that cannot be verified (Prometheus does not answer) fails a drill; `false`
    only reports it."""
    in_practice: StrictBool = False
    """Watched in a practice too (`drills run --mode practice`). Set it only on an SLO whose
    expression reads DR's own series (a label matcher on DR): a practice moves no users to
    DR, so the load probe at DR is its traffic, and an SLO on production's series would
    judge the primary. Make it true with no traffic (0 errors, 0 latency) and keep its hold
    within the load probe's duration plus the expression's rate window."""


class LoadProbe(PlanModel):
    """A bounded open-model load through the public DNS name: a fixed rate for a fixed
    time, whatever the answers take, so slow answers cannot hide (no coordinated
    omission)."""

    url: HttpUrl
    """The URL to load, through the plan's DNS name; resolved on its authoritative servers
    and requested at the address they give, with the name as Host."""
    rate: Annotated[int, Field(ge=1, le=5000, strict=True)]
    """Requests started each second, whether earlier ones have answered or not."""
    duration: Annotated[PositiveDuration, Field(le=600)] = 20.0
    """How long the load lasts, such as 20s."""
    p95: PositiveDuration
    """The 95th-percentile latency the load must stay within, such as 500ms."""
    error_rate: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 0.01
    """The part of requests that may fail (not 2xx, or no answer): 0.01 = 1 %."""
    timeout: PositiveDuration = 10.0
    """How long one request may take before it counts as an error."""
