"""The sizing arithmetic, checked against the background article's worked example."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import pytest

from drills.capacity.sizing import (
    effective_compute,
    gpus_for_demand,
    gpus_for_target,
    per_month,
)


def test_ten_million_requests_a_day_need_about_35_gpus() -> None:
    # Recomputed here step by step, in exact fractions, as the article does it.
    tokens_a_day = Fraction(10_000_000 * 800)
    seconds_available = Fraction(24 * 3600) * Fraction(95, 100)
    needed_tps = tokens_a_day / seconds_available
    without_reserve = needed_tps / 4000
    with_reserve = without_reserve / (1 - Fraction(3, 10))
    assert round(float(needed_tps)) == 97466
    assert round(float(without_reserve), 1) == 24.4
    assert round(float(with_reserve), 1) == 34.8
    got = gpus_for_demand(10_000_000, 800, 4000, reserve=0.3, availability=0.95)
    assert got == pytest.approx(float(with_reserve), rel=1e-12)
    assert gpus_for_target(got, 100) == 35 == math.ceil(with_reserve)
    assert gpus_for_target(got, 50) == math.ceil(with_reserve / 2) == 18


def test_a_whole_number_of_gpus_is_not_rounded_up_by_float_noise() -> None:
    assert gpus_for_target(24.000000000001, 100) == 24
    assert gpus_for_target(24.01, 100) == 25


@pytest.mark.parametrize(
    ("reserve", "availability", "tps"), [(1.0, 0.95, 4000), (0.3, 0.0, 4000), (0.3, 0.9, 0)]
)
def test_impossible_inputs_are_refused(reserve: float, availability: float, tps: float) -> None:
    with pytest.raises(ValueError):
        gpus_for_demand(1, 1, tps, reserve=reserve, availability=availability)


def test_effective_compute_and_a_month_of_an_hourly_price() -> None:
    assert effective_compute(24, 0.5, 0.25) == 3.0
    assert per_month(Decimal("2.49") * 24) == Decimal("43624.80")
    assert per_month(Decimal("0.001")) == Decimal("0.73")
