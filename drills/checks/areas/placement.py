"""Would the scheduler put a pod on a node? nodeSelector, required node affinity and taints.

Pure functions over the API's plain dicts, as the scheduler's filter plugins
(NodeAffinity, TaintToleration, NodeResourcesFit) decide; no check is registered here.
Each refusal is said in words that name the label or taint, for the evidence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from drills.checks.areas.cluster_resources import ZERO, NodeFacts, Resources

# Effects that keep a new pod off a node; PreferNoSchedule only discourages.
_HARD_EFFECTS = ("NoSchedule", "NoExecute")


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if toleration.get("operator") == "Exists":
        return not key or key == taint.get("key")
    return key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def taint_text(taint: Mapping[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"taint {taint.get('key')}{value}:{taint.get('effect')}"


def untolerated(node: Mapping[str, Any], tolerations: Iterable[Mapping[str, Any]]) -> list[str]:
    """The node's hard taints the pod does not tolerate, as words."""
    tols = list(tolerations)
    return [
        taint_text(t)
        for t in (node.get("spec") or {}).get("taints") or []
        if t.get("effect") in _HARD_EFFECTS and not any(_tolerates(x, t) for x in tols)
    ]


def _expression_holds(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op = expr.get("key", ""), expr.get("operator", "")
    values = [str(v) for v in expr.get("values") or []]
    have = labels.get(key)
    if op == "In":
        return have is not None and have in values
    if op == "NotIn":
        return have is None or have not in values
    if op == "Exists":
        return have is not None
    if op == "DoesNotExist":
        return have is None
    if op in ("Gt", "Lt") and have is not None and values:
        try:
            left, right = int(have), int(values[0])
        except ValueError:
            return False
        return left > right if op == "Gt" else left < right
    return False


def _expression_text(expr: Mapping[str, Any]) -> str:
    values = ",".join(str(v) for v in expr.get("values") or [])
    return f"label {expr.get('key')} {expr.get('operator')} {values}".rstrip()


def _term_refusal(term: Mapping[str, Any], labels: Mapping[str, str], name: str) -> str | None:
    """Why one nodeSelectorTerm does not match the node; None when it does."""
    with_name = {**labels, "metadata.name": name}
    for expr in term.get("matchExpressions") or []:
        if not _expression_holds(expr, labels):
            return _expression_text(expr)
    for expr in term.get("matchFields") or []:
        if not _expression_holds(expr, with_name):
            return f"field {expr.get('key')} {expr.get('operator')}"
    return None


def affinity_refusal(
    pod_spec: Mapping[str, Any], labels: Mapping[str, str], name: str
) -> str | None:
    """Why the pod's nodeSelector or required node affinity rules the node out; None if not."""
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(key) != str(value):
            return f"nodeSelector {key}={value}"
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return None
    refusals = [_term_refusal(t, labels, name) for t in terms]  # terms are ORed
    if any(r is None for r in refusals):
        return None
    return f"required affinity ({refusals[0]})"


def refusal(node: Mapping[str, Any], facts: NodeFacts, pod_spec: Mapping[str, Any]) -> str | None:
    """Why the pod cannot land on the node at all; None when it can."""
    if not facts.ready:
        return "node not Ready"
    if not facts.schedulable:
        return "node cordoned"
    excluded = affinity_refusal(pod_spec, facts.labels, facts.name)
    if excluded:
        return excluded
    taints = untolerated(node, pod_spec.get("tolerations") or [])
    return taints[0] if taints else None


def fits_per_node(allocatable: Resources, per_replica: Resources) -> int:
    """How many replicas of this size fit into a node's allocatable resources."""
    counts = [
        int(allocatable.get(name, ZERO) / amount)
        for name, amount in per_replica.items()
        if amount > ZERO
    ]
    return min(counts) if counts else int(allocatable.get("pods", Decimal(110)))
