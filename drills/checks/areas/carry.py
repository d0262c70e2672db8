"""Readiness check of category "Cluster": can DR carry the primary's measured demand?

Answering is not carrying: DR may start every ``dr_replicas`` and still be too small for
the primary's traffic. For each service the plan gives a ``demand`` for, the primary's peak
of the last 24 h (from Prometheus; the plan's static figure only where it gives one) sizes
the replicas DR needs; those are compared with what DR can actually schedule for it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from drills.checks.areas.carry_sizing import ServiceCarry, ServiceNeed, evaluate
from drills.checks.areas.cluster_resources import (
    GPU,
    ZERO,
    Templates,
    demand_of,
    node_facts,
    plan_templates,
    taken_over,
)
from drills.checks.areas.demand_query import DAY_S, Peak, peak_over
from drills.checks.areas.gpu_pool import PoolNode, pool_nodes
from drills.checks.areas.kueue import available, queue_of
from drills.checks.areas.placement import refusal
from drills.checks.base import EXAMPLES, CheckContext, Outcome, Status, check, tier_status
from drills.errors import TargetError
from drills.plan import DrillPlan, Workload
from drills.plan.models.demand import ServiceDemand
from drills.targets.kube import cluster_queues, local_queue, priority_classes
from drills.targets.prometheus_api import prometheus_url


@dataclass(frozen=True)
class Figure:
    """A service's demand figure: measured, the static fallback, or why there is none."""

    peak: Peak | None
    source: str  # "prometheus", "static" or "error"
    note: str | None = None


def demand_figure(url: str | None, spec: ServiceDemand, at: float | None = None) -> Figure:
    """The primary's peak over 24 h; the static figure only where the plan gives one."""
    why = "no Prometheus given (cost.prometheus or DRILLS_PROMETHEUS_URL)"
    if spec.query is not None and url:
        try:
            return Figure(peak_over(url, spec.query, DAY_S, spec.resolution, at), "prometheus")
        except TargetError as exc:
            why = str(exc)
    elif spec.query is None:
        why = "the plan gives no query"
    if spec.static is not None:
        return Figure(Peak(spec.static, None, DAY_S), "static", f"{why}: the plan's static figure")
    return Figure(None, "error", why)


def demand_figures(plan: DrillPlan) -> dict[str, Figure]:
    """Every service's figure, the queries asked concurrently."""
    url = prometheus_url(plan)
    sized = {w.key for w in taken_over(plan)}  # plan lint warns of the other keys
    items = [(key, spec) for key, spec in plan.demand.items() if key in sized]
    if not items:
        return {}
    with ThreadPoolExecutor(max_workers=min(8, len(items))) as pool:
        figures = pool.map(lambda item: demand_figure(url, item[1]), items)
        return {key: fig for (key, _), fig in zip(items, figures, strict=True)}


@dataclass(frozen=True)
class DrCluster:
    """What DR's API said, read once: nodes, pods, PriorityClass values, Kueue queues."""

    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    classes: dict[str, int]
    queues: dict[str, dict[str, Any]]
    local_queues: dict[tuple[str, str], str | None]  # (namespace, LocalQueue) → ClusterQueue


def read_dr(ctx: CheckContext, found: Templates) -> DrCluster:
    kube = ctx.targets.dr.kube
    wanted = {(w.namespace, q) for w in taken_over(ctx.plan) if (q := queue_of(found, w))}
    local: dict[tuple[str, str], str | None] = {}
    for namespace, name in sorted(wanted):
        lq = local_queue(kube, namespace, name) or {}
        local[(namespace, name)] = ((lq.get("spec") or {}).get("clusterQueue")) or None
    return DrCluster(
        nodes=kube.nodes(),
        pods=kube.pods(None),
        classes={name: int(pc.get("value") or 0) for name, pc in priority_classes(kube).items()},
        queues=cluster_queues(kube) if wanted else {},
        local_queues=local,
    )


class _Fit:
    """Which usable nodes a pod spec lands on, worked out once per distinct placement
    (nodeSelector, affinity, tolerations): 200 services share a handful."""

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self._nodes = [
            (str((n.get("metadata") or {}).get("name")), n, node_facts(n)) for n in nodes
        ]
        self._seen: dict[str, frozenset[str]] = {}

    def names(self, pod_spec: Mapping[str, Any]) -> frozenset[str]:
        key = json.dumps([pod_spec.get(k) for k in ("nodeSelector", "affinity", "tolerations")],
                         sort_keys=True, default=str)  # fmt: skip
        if key not in self._seen:
            self._seen[key] = frozenset(
                name for name, node, facts in self._nodes if refusal(node, facts, pod_spec) is None
            )
        return self._seen[key]


def _yieldable(node: PoolNode) -> int:
    """GPUs the takeover can have on a node: idle, its own standbys', and lower-priority work's."""
    return max(0, node.allocatable - node.sentinel - node.other)


def needs_of(
    plan: DrillPlan, found: Templates, dr: DrCluster, figures: Mapping[str, Figure]
) -> list[ServiceNeed]:
    """Each measured service with what DR can give it (pure: the benchmark times this)."""
    takeover = taken_over(plan)
    gpus = {w.key: demand_of(w, found.objects.get(w.key), found.sources[w.key]).gpus_per_replica
            for w in takeover}  # fmt: skip
    queue = {w.key: queue_of(found, w) for w in takeover}
    cq_of = {w.key: dr.local_queues.get((w.namespace, q)) if (q := queue[w.key]) else None
             for w in takeover}  # fmt: skip
    total_dr_gpus = sum(gpus[w.key] * w.dr_replicas for w in takeover)
    fit = _Fit(dr.nodes)
    pools: dict[int, list[PoolNode]] = {}
    out = []
    for w in takeover:
        spec, figure = plan.demand.get(w.key), figures.get(w.key)
        if spec is None or figure is None or figure.peak is None:
            continue
        template = found.template(w)
        template_spec = template.get("spec") or {}
        priority = dr.classes.get(str(template_spec.get("priorityClassName") or ""), 0)
        if priority not in pools:
            pools[priority] = pool_nodes(plan, dr.nodes, dr.pods, dr.classes, priority)
        landing = fit.names(template_spec)
        fits = [n for n in pools[priority] if n.usable and n.name in landing]
        others = total_dr_gpus - gpus[w.key] * w.dr_replicas
        out.append(
            ServiceNeed(
                key=w.key, tier=w.tier.value, spec=spec, peak=figure.peak.value,
                seen_at=figure.peak.seen_at, source=figure.source,
                gpus_per_replica=gpus[w.key], dr_replicas=w.dr_replicas,
                schedulable_gpus=max(0, sum(map(_yieldable, fits)) - others),
                quota_gpus=_quota_gpus(w, takeover, gpus, queue, cq_of, dr),
            )
        )  # fmt: skip
    return out


def _quota_gpus(
    w: Workload,
    takeover: list[Workload],
    gpus: Mapping[str, int],
    queue: Mapping[str, str | None],
    cq_of: Mapping[str, str | None],
    dr: DrCluster,
) -> int | None:
    """GPUs the workload's ClusterQueue admits for it, the rest of its queue's takeover
    counted first; None when it uses no Kueue; 0 when its queue is missing at DR."""
    if queue[w.key] is None:
        return None
    cq = cq_of[w.key]
    if cq is None or cq not in dr.queues:
        return 0
    have = int(available(cq, dr.queues).get(GPU, ZERO))
    rest = sum(gpus[o.key] * o.dr_replicas for o in takeover if o is not w and cq_of[o.key] == cq)
    return max(0, have - rest)


def carry_outcome(results: list[ServiceCarry], errors: Mapping[str, str]) -> Outcome:
    rows = [r.evidence() for r in results]
    short = [r for r in results if not r.carried]
    evidence: dict[str, Any] = {
        "services": rows[: EXAMPLES * 4],
        "service_count": len(results) + len(errors),
        "errors": dict(list(errors.items())[:EXAMPLES]),
        "fallbacks": [r["service"] for r in rows if r["source"] == "static"][:EXAMPLES],
    }
    if errors:
        key, why = next(iter(errors.items()))
        return Outcome(
            Status.ERROR,
            f"no trustworthy demand for {len(errors)} service(s): {key}: {why}",
            evidence,
            remediation="Make the demand query answer one series in Prometheus (check "
            "cost.prometheus / DRILLS_PROMETHEUS_URL), or give the plan a static figure.",
        )
    if not short:
        worst = max(results, key=lambda r: r.gpus, default=None)
        detail = (
            ""
            if worst is None
            else f"; {worst.need.key} needs {worst.gpus} GPUs, DR has {worst.available_gpus}"
        )
        summary = f"DR carries the target of all {len(results)} service(s){detail}"
        return Outcome(Status.PASS, summary, evidence)
    status, blocking = tier_status(r.need.tier for r in short)  # type: ignore[misc]
    first = short[0]
    summary = (
        f"{first.need.key}: {first.need.spec.target_percent:g}% of its peak "
        f"{first.need.peak:.4g} {first.need.spec.unit} needs {first.replicas} replicas, "
        f"{first.gpus} GPUs; DR can give {first.available_gpus}: {first.missing_gpus} GPUs missing"
    )
    if len(short) > 1:
        summary += f" (and {len(short) - 1} more service(s))"
    return Outcome(
        status,
        summary,
        evidence,
        remediation="Add GPUs to the DR pool (or let lower-priority work there yield, or raise "
        "the Kueue quota), or lower target_percent if DR may carry less.",
        blocking=blocking,
    )


@check(
    "capacity.carry",
    title="DR carries the primary's demand",
    category="Cluster",
    reads=(
        "Prometheus (cost.prometheus or DRILLS_PROMETHEUS_URL): each demand query's "
        "max_over_time over 24 h; the primary's (else DR's) pod templates; at DR its nodes, "
        "pods, PriorityClasses and Kueue queues."
    ),
    blocks="A critical service's replicas for target_percent of the primary's peak do not fit "
    "at DR.",
    warns="The same for a normal-tier service.",
    remediation=(
        "Add DR GPUs, let lower-priority DR work yield, or raise the Kueue quota; or lower the "
        "service's target_percent."
    ),
    timeout_s=40.0,
)
def capacity_carry(ctx: CheckContext) -> Outcome:
    """For each service the plan gives a ``demand`` for, DR can schedule the replicas that
    carry ``target_percent`` of the primary's peak over the last 24 h.

    The peak is ``max_over_time((query)[24h:resolution])`` from Prometheus, and the evidence
    says when it was seen; the plan's ``static`` figure is used only where the plan gives
    one, and the evidence then says so. Prometheus unreachable, or a query that gives no
    series, is an error, never a pass.

    required = ceil(target% × peak ÷ per_replica ÷ (1 − reserve)) replicas × GPUs per
    replica. DR can give a service the GPUs on the Ready, uncordoned nodes its pod template
    fits (nodeSelector, required affinity, taints) that are idle, held by its standbys, or
    held by work of a lower PriorityClass value (it would yield), less what the rest of the
    takeover needs at its ``dr_replicas``, and within what its Kueue ClusterQueue admits.
    A critical service short of GPUs fails and blocks; a normal one warns.
    """
    if not ctx.plan.demand:
        return Outcome(Status.PASS, "the plan gives no demand to carry", {"services": []})
    figures = demand_figures(ctx.plan)
    errors = {k: f.note or "no figure" for k, f in figures.items() if f.peak is None}
    found = plan_templates(ctx.plan, ctx.targets)
    needs = needs_of(ctx.plan, found, read_dr(ctx, found), figures)
    return carry_outcome(evaluate(needs), errors)
