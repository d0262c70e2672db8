"""The plan's cost settings: where its prices and GPU metrics are, and the demand its DR
pool must serve. `drills capacity` reads them; none is needed for a drill."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from drills.plan.models.base import PlanModel
from drills.plan.types import FilePath, HttpUrl

Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Demand(PlanModel):
    """The daily inference demand DR must serve, and how much of it a takeover must carry.

    GPUs for all of it = requests_per_day × output_per_request ÷ (86,400 × availability)
    ÷ gpu_throughput ÷ (1 − reserve).
    """

    # No key says "token": a plan key named like a credential must hold a reference.

    requests_per_day: Positive
    """Requests a day at the primary."""
    output_per_request: Positive
    """Mean tokens generated per request."""
    gpu_throughput: Positive
    """Tokens per second one GPU serves, from a load test of the model on DR's GPUs."""
    reserve: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)] = 0.3
    """The part of each GPU's throughput kept free for bursts (0.3 = 30 %)."""
    availability: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = 0.95
    """The part of the day the service is available to serve."""
    target_percent: Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)] = 100.0
    """The part of the demand a takeover must carry, in percent."""


class CostSettings(PlanModel):
    """What `drills capacity` needs to price and size the DR pool."""

    pricing: FilePath | None = None
    """A pricing file (OpenCost's custom-pricing JSON), relative to the plan's directory;
    `--pricing` or DRILLS_PRICING overrides it."""
    prometheus: HttpUrl | None = None
    """The Prometheus that scrapes DR's DCGM exporter (DCGM_FI_DEV_GPU_UTIL);
    `--prometheus` or DRILLS_PROMETHEUS_URL overrides it."""
    demand: Demand | None = None
    """The demand DR must serve; without it the report gives no target."""
