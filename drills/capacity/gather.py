"""Read what the report needs: the DR pool (nodes, pods, PriorityClasses), what the takeover
needs, the prices and the GPU metrics. Every read is bounded; a failed read of the cluster
raises, a failed read of Prometheus falls back to allocation and says so."""

from __future__ import annotations

from pathlib import Path

from drills.capacity.idle import query_utilisation
from drills.capacity.pricing import Pricing, load_pricing
from drills.capacity.report import Inputs, Needs
from drills.capacity.sizing import gpus_for_demand, gpus_for_target
from drills.checks.areas.carry import demand_figures
from drills.checks.areas.carry_sizing import formula, replicas_needed
from drills.checks.areas.cluster_resources import Templates, demand_of, plan_templates, taken_over
from drills.checks.areas.gpu_pool import critical_priority, pool_nodes, priority_classes
from drills.errors import TargetError
from drills.plan import DrillPlan
from drills.targets.sites import Targets

PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
NO_PRICING = "no pricing file: give the plan cost.pricing, or --pricing / DRILLS_PRICING"
NO_PROMETHEUS = (
    "no Prometheus given (cost.prometheus, --prometheus or DRILLS_PROMETHEUS_URL): "
    "the idle ratio is from allocation"
)


def plan_needs(plan: DrillPlan, templates: Templates) -> Needs:
    """GPUs a takeover needs: every tier it brings up at its dr_replicas, and the target
    part of the plan's demand where the plan states one."""
    by_tier: dict[str, int] = {}
    for w in taken_over(plan):
        demand = demand_of(w, templates.objects.get(w.key), templates.sources.get(w.key, ""))
        by_tier[w.tier.value] = (
            by_tier.get(w.tier.value, 0) + demand.gpus_per_replica * w.dr_replicas
        )
    demand_model = plan.cost.demand if plan.cost else None
    if demand_model is None and plan.demand:
        return _measured_needs(plan, templates, by_tier)
    if demand_model is None:
        why = "the plan states no demand (cost.demand or demand), so there is no target"
        return Needs(sum(by_tier.values()), by_tier, None, None, why)
    all_demand = gpus_for_demand(
        demand_model.requests_per_day,
        demand_model.output_per_request,
        demand_model.gpu_throughput,
        reserve=demand_model.reserve,
        availability=demand_model.availability,
    )
    target = gpus_for_target(all_demand, demand_model.target_percent)
    note = (
        f"{demand_model.target_percent:g} % of {all_demand:.1f} GPUs: "
        f"{demand_model.requests_per_day:,.0f} requests a day × "
        f"{demand_model.output_per_request:g} tokens at "
        f"{demand_model.gpu_throughput:g} tokens/s a GPU, "
        f"{demand_model.reserve:.0%} reserve, {demand_model.availability:.0%} available"
    )
    return Needs(sum(by_tier.values()), by_tier, target, demand_model.target_percent, note)


def _measured_needs(plan: DrillPlan, templates: Templates, by_tier: dict[str, int]) -> Needs:
    """The target from the services' measured demand (the plan's ``demand``, as
    `capacity.carry` sizes it): each measured service at the replicas that carry its
    target_percent of the primary's 24 h peak, the rest of the takeover at dr_replicas."""
    figures = demand_figures(plan)
    target, notes, percents = 0, [], set()
    for w in taken_over(plan):
        per_replica = demand_of(
            w, templates.objects.get(w.key), templates.sources.get(w.key, "")
        ).gpus_per_replica
        spec, figure = plan.demand.get(w.key), figures.get(w.key)
        if spec is None or figure is None:
            target += per_replica * w.dr_replicas
            continue
        if figure.peak is None:
            return Needs(sum(by_tier.values()), by_tier, None, None,
                         f"no trustworthy demand for {w.key}: {figure.note}")  # fmt: skip
        replicas = max(w.dr_replicas, replicas_needed(figure.peak.value, spec))
        target += per_replica * replicas
        percents.add(spec.target_percent)
        notes.append(f"{w.key}: {formula(figure.peak.value, spec, per_replica)}")
    percent = percents.pop() if len(percents) == 1 else None
    note = "the 24 h peak of each measured service; " + "; ".join(notes)
    return Needs(sum(by_tier.values()), by_tier, target, percent, note)


def pricing_for(plan: DrillPlan, override: str | None) -> tuple[Pricing | None, str | None]:
    """The pricing file the option or environment names, else the plan's; PricingError when
    it is unusable."""
    if override:
        return load_pricing(Path(override).expanduser()), None
    if plan.cost is not None and plan.cost.pricing is not None:
        return load_pricing(plan.resolve_path(plan.cost.pricing)), None
    return None, NO_PRICING


def gather_capacity(
    plan: DrillPlan,
    targets: Targets,
    *,
    pricing: Pricing | None,
    pricing_note: str | None,
    prometheus: str | None,
    window_s: float,
) -> Inputs:
    """Everything the report computes from; TargetError when DR's cluster cannot be read."""
    kube = targets.site("dr").kube
    nodes = kube.nodes()
    pods = kube.pods(None)
    classes = priority_classes(kube.list_items(PRIORITY_CLASSES))
    templates = plan_templates(plan, targets)
    critical = critical_priority(
        plan,
        {k: (v or {}).get("spec", {}).get("template") or {} for k, v in templates.objects.items()},
        classes,
    )
    pool = pool_nodes(plan, nodes, pods, classes, critical)
    notes = [f"the primary could not be read: {templates.note}"] if templates.note else []
    utilisation = None
    idle_note = NO_PROMETHEUS if not prometheus else "DR has no GPU nodes to measure"
    if prometheus and pool:
        try:
            utilisation = query_utilisation(prometheus, [n.name for n in pool], window_s)
        except TargetError as exc:
            idle_note = f"{exc}; the idle ratio is from allocation"
    return Inputs(
        plan=plan.name,
        nodes=pool,
        needs=plan_needs(plan, templates),
        pricing=pricing,
        pricing_note=pricing_note,
        utilisation=utilisation,
        idle_note=idle_note if utilisation is None else None,
        window_s=window_s,
        notes=tuple(notes),
    )
