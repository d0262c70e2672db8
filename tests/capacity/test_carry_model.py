"""The arithmetic of capacity.carry, checked by hand."""

from __future__ import annotations

from drills.checks.areas.carry_sizing import (
    ServiceNeed,
    carried_percent,
    evaluate,
    formula,
    replicas_needed,
)
from drills.plan.models.demand import ServiceDemand


def _spec(**fields: object) -> ServiceDemand:
    return ServiceDemand.model_validate({"static": 1, "per_replica": 20, **fields})


def test_replicas_needed_is_the_formula_rounded_up() -> None:
    # 100 % × 30 ÷ 20 ÷ 0.7 = 2.14… → 3; 50 % of it: 1.07… → 2; exactly 28 ÷ 20 ÷ 0.7 = 2.
    assert replicas_needed(30, _spec()) == 3
    assert replicas_needed(30, _spec(target_percent=50)) == 2
    assert replicas_needed(28, _spec()) == 2  # not 3 by float noise
    assert replicas_needed(4000, _spec(per_replica=1000, reserve=0)) == 4
    text = formula(30, _spec(), 2)
    assert text == ("required = ceil(100% × 30 requests/s ÷ 20 requests/s per replica ÷ "
                    "(1 − 0.3)) = 3 replicas × 2 GPU(s) per replica = 6 GPUs")  # fmt: skip


def test_percent_carried() -> None:
    # 3 replicas × 20 × 0.7 = 42 of 30 requests/s: 140 %.
    assert carried_percent(3, 30, _spec()) == 140.0
    assert carried_percent(1, 28, _spec()) == 50.0


def _need(key: str, tier: str, peak: float, room: int, quota: int | None = None) -> ServiceNeed:
    return ServiceNeed(key, tier, _spec(), peak, None, "static", 1, 1, room, quota)


def test_critical_services_are_given_gpus_first_and_what_they_take_is_gone() -> None:
    # Each needs 3 GPUs (30 requests/s); 4 schedulable, and the first took 2 beyond its 1.
    needs = [_need("b/normal", "normal", 30, 4), _need("a/critical", "critical", 30, 4)]
    results = {r.need.key: r for r in evaluate(needs)}
    assert results["a/critical"].missing_gpus == 0
    assert results["b/normal"].available_gpus == 2 and results["b/normal"].missing_gpus == 1
    # The queue admits less than the nodes hold.
    (only,) = evaluate([_need("c/q", "critical", 30, 10, quota=1)])
    assert (only.available_gpus, only.missing_gpus) == (1, 2)
