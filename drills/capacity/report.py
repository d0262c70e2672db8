"""The right-sizing report of a plan's DR pool, as of now: pure arithmetic over what
:mod:`drills.capacity.gather` read (the pool, the prices, the GPU metrics)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from drills.capacity.idle import GpuUtilisation, idle_ratio_of
from drills.capacity.pricing import GpuPrice, Pricing
from drills.capacity.sizing import CENT, HOURS_PER_MONTH, effective_compute, per_month
from drills.checks.areas.gpu_pool import PoolNode

FIGURES = ("allocatable", "reserved", "standby", "sentinel", "low_priority", "idle")


@dataclass(frozen=True)
class Needs:
    """GPUs a takeover needs at DR."""

    minimum: int  # dr_replicas × GPUs a replica, over the tiers a takeover brings up
    by_tier: Mapping[str, int]
    target: int | None  # for target_percent of the plan's demand
    target_percent: float | None
    target_note: str  # how the target was found, or why there is none


@dataclass(frozen=True)
class Inputs:
    plan: str
    nodes: Sequence[PoolNode]
    needs: Needs
    pricing: Pricing | None
    pricing_note: str | None  # why there are no prices, when there are none
    utilisation: Sequence[GpuUtilisation] | None  # None: not measured (see idle_note)
    idle_note: str | None
    window_s: float
    notes: Sequence[str] = field(default_factory=tuple)


def _money(value: Decimal | None) -> float | None:
    return None if value is None else float(value.quantize(CENT, rounding=ROUND_HALF_UP))


@dataclass(frozen=True)
class CapacityReport:
    inputs: Inputs
    prices: Mapping[str, GpuPrice]  # node → its price
    unpriced_nodes: tuple[str, ...]
    cost_per_hour: Decimal | None
    cost_per_month: Decimal | None
    idle_ratio: float
    idle_source: str  # "prometheus" or "allocation"
    idle_note: str | None
    availability: float
    recommended_gpus: int
    takeover_gpus: int  # what a takeover can get at DR, preempting low-priority work
    missing_gpus: int
    preemptible_gpus: int
    surplus_gpus: int
    saving_per_month: Decimal | None

    @property
    def physical_gpus(self) -> int:
        return sum(n.allocatable for n in self.inputs.nodes)

    @property
    def currency(self) -> str | None:
        return self.inputs.pricing.currency if self.inputs.pricing else None

    @property
    def effective_gpus(self) -> float:
        return effective_compute(self.physical_gpus, self.availability, 1 - self.idle_ratio)

    def totals(self) -> dict[str, int]:
        return {f: sum(getattr(n, f) for n in self.inputs.nodes) for f in FIGURES}

    def by_model(self) -> list[dict[str, Any]]:
        models: dict[str, dict[str, Any]] = {}
        for n in self.inputs.nodes:
            row = models.setdefault(n.model, {"model": n.model, **dict.fromkeys(FIGURES, 0)})
            for f in FIGURES:
                row[f] += getattr(n, f)
            row["nodes"] = row.get("nodes", 0) + 1
        return [models[m] for m in sorted(models)]

    @property
    def recommendation_text(self) -> str:
        needs = self.inputs.needs
        why = (
            "the takeover's minimum"
            if self.recommended_gpus == needs.minimum
            else (f"{needs.target_percent:g} % of the demand")
        )
        if self.missing_gpus:
            return (
                f"DR cannot give a takeover {self.missing_gpus} of the {self.recommended_gpus} "
                f"GPUs it needs ({why}): add {self.missing_gpus} GPUs at DR, or lower the target."
            )
        text = f"Reserve {self.recommended_gpus} GPUs ({why})"
        if self.preemptible_gpus:
            text += f"; run preemptible work on the other {self.preemptible_gpus}"
        if self.surplus_gpus and self.saving_per_month is not None:
            text += (
                f"; that moves {self.surplus_gpus} GPUs out of the standby and saves "
                f"{self.currency} {self.saving_per_month:,.2f} a month"
            )
        elif self.surplus_gpus:
            text += f"; that moves {self.surplus_gpus} GPUs out of the standby (unpriced)"
        return text + "."

    def to_json(self) -> dict[str, Any]:
        needs = self.inputs.needs
        totals = self.totals()
        return {
            "plan": self.inputs.plan,
            "dr_gpus": {
                **totals,
                "by_model": self.by_model(),
                "unpriced_nodes": list(self.unpriced_nodes),
            },
            "needed_minimum_gpus": needs.minimum,
            "needed_minimum_by_tier": dict(needs.by_tier),
            "needed_target_gpus": needs.target,
            "needed_target_note": needs.target_note,
            "standby_cost_per_month": _money(self.cost_per_month),
            "standby_cost_per_hour": _money(self.cost_per_hour),
            "hours_per_month": HOURS_PER_MONTH,
            "currency": self.currency,
            "pricing_note": self.inputs.pricing_note,
            "idle_ratio": round(self.idle_ratio, 6),
            "idle_source": self.idle_source,
            "idle_note": self.idle_note,
            "window_seconds": self.inputs.window_s,
            "effective_compute": {
                "physical_gpus": self.physical_gpus,
                "availability": round(self.availability, 6),
                "utilization": round(1 - self.idle_ratio, 6),
                "gpus": round(self.effective_gpus, 3),
            },
            "preemptible_gpus": self.preemptible_gpus,
            "recommendation": {
                "reserve_gpus": self.recommended_gpus,
                "takeover_gpus": self.takeover_gpus,
                "missing_gpus": self.missing_gpus,
                "preemptible_gpus": self.preemptible_gpus,
                "released_gpus": self.surplus_gpus,
                "saving_per_month": _money(self.saving_per_month),
                "text": self.recommendation_text,
            },
            "notes": list(self.inputs.notes),
        }


def _idle(inputs: Inputs) -> tuple[float, str, str | None]:
    physical = sum(n.allocatable for n in inputs.nodes)
    by_allocation = sum(n.idle for n in inputs.nodes) / physical if physical else 0.0
    if inputs.utilisation is None:
        return by_allocation, "allocation", inputs.idle_note
    ratio, measured = idle_ratio_of(inputs.utilisation)
    if measured == 0:
        return (
            by_allocation,
            "allocation",
            (
                "Prometheus has no DCGM_FI_DEV_GPU_UTIL for DR's GPU nodes in the window; "
                "the idle ratio is from allocation"
            ),
        )
    note = None
    if measured < physical:
        note = f"DCGM measured {measured} of DR's {physical} GPUs; the ratio is over those"
    return ratio, "prometheus", note


def build_report(inputs: Inputs) -> CapacityReport:
    nodes = inputs.nodes
    prices: dict[str, GpuPrice] = {}
    unpriced = []
    for n in nodes:
        found = inputs.pricing.price(n.labels, n.allocatable) if inputs.pricing else None
        if found is None:
            unpriced.append(n.name)
        else:
            prices[n.name] = found
    cost_hour: Decimal | None = None
    if not any(n.reserved for n in nodes if n.name not in prices):
        cost_hour = sum((prices[n.name].per_gpu_hour * n.reserved for n in nodes if n.reserved),
                        Decimal(0))  # fmt: skip
    ratio, source, note = _idle(inputs)
    physical = sum(n.allocatable for n in nodes)
    usable = sum(n.allocatable for n in nodes if n.usable)
    needs = inputs.needs
    recommended = max(needs.minimum, needs.target or 0)
    takeover = sum(n.allocatable - n.sentinel - n.other for n in nodes if n.usable)
    reserved = sum(n.reserved for n in nodes)
    surplus = max(0, reserved - recommended)
    saving = None
    if cost_hour is not None and reserved:
        # At the pool's mean reserved price: which GPUs go is the operator's choice.
        saving = per_month(cost_hour * surplus / reserved)
    return CapacityReport(
        inputs=inputs,
        prices=prices,
        unpriced_nodes=tuple(unpriced),
        cost_per_hour=cost_hour,
        cost_per_month=None if cost_hour is None else per_month(cost_hour),
        idle_ratio=ratio,
        idle_source=source,
        idle_note=note,
        availability=usable / physical if physical else 0.0,
        recommended_gpus=recommended,
        takeover_gpus=max(0, takeover),
        missing_gpus=max(0, recommended - max(0, takeover)),
        preemptible_gpus=max(0, takeover - recommended),
        surplus_gpus=surplus,
        saving_per_month=saving,
    )
