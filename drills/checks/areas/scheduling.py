"""Readiness checks of category "Cluster": would the workloads' pods actually schedule at DR?

Capacity being there is not enough: a nodeSelector, a required node affinity or a
taint can keep a pod off every GPU node, and a PriorityClass missing at DR makes
the API server refuse the pods outright.
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from typing import Any

from drills.checks.areas.cluster_resources import demand_of, node_facts, plan_templates, taken_over
from drills.checks.areas.placement import fits_per_node, refusal
from drills.checks.base import EXAMPLES, CheckContext, Outcome, Status, check, tier_status
from drills.checks.base import Tier as TierName
from drills.errors import TargetError
from drills.plan import Workload
from drills.targets.kube import priority_classes

TIER_ORDER = ("critical", "normal", "batch")


def _placement(
    w: Workload, template: dict[str, Any], source: str, nodes: list[dict[str, Any]]
) -> dict[str, Any]:
    """Where the workload's DR replicas could go, and what kept it off the other nodes."""
    spec = template.get("spec") or {}
    per_replica = demand_of(w, {"spec": {"template": template}}, source).per_replica
    slots, reasons = 0, Counter[str]()
    for node in nodes:
        facts = node_facts(node)
        why = refusal(node, facts, spec)
        if why is None and fits_per_node(facts.allocatable, per_replica) == 0:
            why = "too small for one replica"
        if why is None:
            slots += fits_per_node(facts.allocatable, per_replica)
        else:
            reasons[why] += 1
    return {
        "workload": w.key,
        "tier": w.tier.value,
        "replicas": w.dr_replicas,
        "slots": slots,
        "excluded_by": dict(reasons.most_common(EXAMPLES)),
    }


@check(
    "cluster.schedulable",
    title="Workloads schedulable at DR",
    category="Cluster",
    reads=(
        "Each workload's pod template (nodeSelector, required node affinity, tolerations, "
        "requests) and the DR cluster's Ready, uncordoned nodes with their labels, taints and"
        " allocatable resources."
    ),
    blocks="A critical workload's DR replicas cannot be placed on matching DR nodes.",
    warns="The same for a normal workload.",
    remediation=(
        "Label DR nodes, or give the workload the tolerations, that the named taint or label "
        "requires, or add matching DR nodes."
    ),
)
def cluster_schedulable(ctx: CheckContext) -> Outcome:
    """For each workload a takeover brings up, enough DR nodes match its pod template's
    ``nodeSelector``, required node affinity and taint tolerations to place its DR replicas.

    Nodes count when Ready and not cordoned; each is filled with as many replicas as
    its allocatable resources hold (one workload at a time: capacity across workloads
    is ``cluster.gpu_capacity``'s question). A blocked workload is named with the taint
    or label that excludes it. A critical workload that cannot be placed fails and
    blocks; a normal one warns.
    """
    plan, targets = ctx.plan, ctx.targets
    nodes = targets.dr.kube.nodes()
    found = plan_templates(plan, targets)
    placements = [
        _placement(w, found.template(w), found.sources[w.key], nodes)
        for w in taken_over(plan)
        if w.dr_replicas > 0
    ]
    blocked = [p for p in placements if p["slots"] < p["replicas"]]
    status, blocking = tier_status(p["tier"] for p in blocked)
    evidence: dict[str, Any] = {
        "nodes": len(nodes),
        "workloads": len(placements),
        "blocked": blocked[:EXAMPLES],
        "blocked_count": len(blocked),
    }
    if not blocked:
        return Outcome(
            Status.PASS, f"all {len(placements)} workloads have nodes to land on", evidence
        )
    first = blocked[0]
    why = next(iter(first["excluded_by"]), "no node")
    return Outcome(
        status,
        f"{len(blocked)} workload(s) cannot be placed at DR: {first['workload']} fits "
        f"{first['slots']} of {first['replicas']} replicas ({why})",
        evidence,
        remediation="Add the toleration (or node label) the workload needs to its template, "
        "or remove the taint from the DR GPU nodes: `kubectl taint nodes NODE KEY-`.",
        blocking=blocking,
    )


def _used_classes(ctx: CheckContext) -> dict[str, dict[str, Any]]:
    """PriorityClass name → the tiers and workloads whose pod templates name it."""
    found = plan_templates(ctx.plan, ctx.targets)
    used: dict[str, dict[str, Any]] = {}
    for w in ctx.plan.workloads:
        name = (found.template(w).get("spec") or {}).get("priorityClassName")
        if name:
            entry = used.setdefault(name, {"tiers": set(), "workloads": []})
            entry["tiers"].add(w.tier.value)
            entry["workloads"].append(w.key)
    return used


def _order_problems(used: dict[str, dict[str, Any]], values: dict[str, int]) -> list[str]:
    """Where a lower tier's class outranks a higher tier's: critical > normal > batch."""
    lowest: dict[str, int] = {}
    highest: dict[str, int] = {}
    for name, entry in used.items():
        if name not in values:
            continue
        for tier in entry["tiers"]:
            lowest[tier] = min(lowest.get(tier, values[name]), values[name])
            highest[tier] = max(highest.get(tier, values[name]), values[name])
    problems = []
    present = [t for t in TIER_ORDER if t in lowest]
    for upper, lower in pairwise(present):
        if lowest[upper] <= highest[lower]:
            problems.append(f"{upper} ({lowest[upper]}) is not above {lower} ({highest[lower]})")
    return problems


@check(
    "cluster.priority_classes",
    title="Priority classes at DR",
    category="Cluster",
    reads="The PriorityClasses the workloads' pod templates name, in both clusters.",
    blocks=(
        "A PriorityClass of a critical workload is missing at DR or has another value, or the"
        " tiers are out of order at DR."
    ),
    warns="The same problem touching only normal or batch workloads.",
    remediation=(
        "Create the PriorityClasses at DR with the primary's values, keeping critical above "
        "normal above batch."
    ),
)
def cluster_priority_classes(ctx: CheckContext) -> Outcome:
    """Every PriorityClass a workload's pod template names exists at DR with the primary's
    value, and the tiers keep their order at DR: critical > normal > batch.

    A pod naming a PriorityClass that does not exist is refused by the API server, so
    the standby never starts; a different value changes who preempts whom when DR is
    short. A problem touching a critical workload fails and blocks; others warn.
    """
    used = _used_classes(ctx)
    dr = priority_classes(ctx.targets.dr.kube)
    try:
        primary = priority_classes(ctx.targets.primary.kube)
    except TargetError:  # an unreadable primary (an incident) compares nothing
        primary = {}
    values = {name: int(pc.get("value") or 0) for name, pc in dr.items()}
    missing, different = [], []
    failing: list[TierName] = []
    for name, entry in sorted(used.items()):
        if name not in dr:
            missing.append(name)
        elif name in primary and int(primary[name].get("value") or 0) != values[name]:
            different.append(f"{name}: {primary[name].get('value')} at the primary, "
                             f"{values[name]} at DR")  # fmt: skip
        else:
            continue
        failing.extend(entry["tiers"])
    order = _order_problems(used, values)
    if order:
        failing.append("critical")
    status, blocking = tier_status(failing)
    evidence = {
        "used": {n: sorted(e["tiers"]) for n, e in used.items()},
        "dr_values": {n: values[n] for n in used if n in values},
        "missing_at_dr": missing,
        "different": different[:EXAMPLES],
        "order": order,
    }
    if status is Status.PASS:
        return Outcome(status, f"{len(used)} priority class(es) at DR, tiers in order", evidence)
    parts = ([f"missing at DR: {', '.join(missing)}"] if missing else []) + different + order
    return Outcome(
        status,
        "; ".join(parts),
        evidence,
        remediation="Create the PriorityClasses at DR from the same manifests as the primary "
        "(`kubectl get priorityclass NAME -o yaml` at the primary, apply at DR).",
        blocking=blocking,
    )
