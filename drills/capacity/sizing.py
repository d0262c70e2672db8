"""The arithmetic of sizing a GPU pool, in one place: the report, the docs' worked example
and its test all call these, so they cannot disagree."""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

# A month of standby, in hours: 365 days × 24 h ÷ 12, the figure cloud price sheets use.
HOURS_PER_MONTH = 730
SECONDS_PER_DAY = 86_400
CENT = Decimal("0.01")


def gpus_for_demand(
    requests_per_day: float,
    tokens_per_request: float,
    tokens_per_second_per_gpu: float,
    *,
    reserve: float,
    availability: float,
) -> float:
    """GPUs an inference service needs for its daily demand, before rounding up.

    The tokens of a day are served in the seconds the service is available, by GPUs that
    each keep ``reserve`` of their throughput free for bursts:
    ``requests × tokens ÷ (86,400 × availability) ÷ tokens_per_s ÷ (1 − reserve)``.
    """
    if not 0 <= reserve < 1:
        raise ValueError("reserve must be at least 0 and below 1")
    if not 0 < availability <= 1:
        raise ValueError("availability must be above 0 and at most 1")
    if tokens_per_second_per_gpu <= 0:
        raise ValueError("tokens_per_second_per_gpu must be above 0")
    tokens_per_second = requests_per_day * tokens_per_request / (SECONDS_PER_DAY * availability)
    return tokens_per_second / tokens_per_second_per_gpu / (1 - reserve)


def gpus_for_target(gpus_for_all_demand: float, target_percent: float) -> int:
    """Whole GPUs to serve ``target_percent`` of the demand (a part of a GPU is a GPU)."""
    # Rounded first, so 34.8 × 100 % does not become 35.000000001 → 36.
    return math.ceil(round(gpus_for_all_demand * target_percent / 100, 9))


def effective_compute(physical: float, availability: float, utilization: float) -> float:
    """Compute actually delivered: physical × availability × utilization."""
    return physical * availability * utilization


def per_month(price_per_hour: Decimal) -> Decimal:
    """An hourly price over a month (730 h), to the cent."""
    return (price_per_hour * HOURS_PER_MONTH).quantize(CENT, rounding=ROUND_HALF_UP)
