"""Where the scheduler would bind a pod: the first node it fits, or why none fits.

As kube-scheduler's filters decide (NodeUnschedulable, NodeAffinity, TaintToleration,
NodeResourcesFit for GPUs), with the message a real cluster puts in the pod's
``PodScheduled=False`` condition: ``0/5 nodes are available: 3 Insufficient
nvidia.com/gpu, 2 node(s) had untolerated taint {nvidia.com/gpu: present}.``
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from drills.checks.areas.placement import affinity_refusal, untolerated
from drills_lab.kubeapi import pods as podlib
from drills_lab.kubeapi.objects import dig


def _taint_words(node: dict[str, Any], tolerations: list[dict[str, Any]]) -> str | None:
    refused = untolerated(node, tolerations)
    if not refused:
        return None
    for taint in dig(node, "spec", "taints") or []:
        # The scheduler names the first taint it could not tolerate, as {key: value}.
        if f"taint {taint.get('key')}" in refused[0]:
            return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    return "node(s) had untolerated taint"


def _refusal(node: dict[str, Any], spec: dict[str, Any], free_gpus: int) -> str | None:
    name = node["metadata"]["name"]
    if dig(node, "spec", "unschedulable"):
        return "node(s) were unschedulable"
    if affinity_refusal(spec, node["metadata"].get("labels") or {}, name):
        return "node(s) didn't match Pod's node affinity/selector"
    taint = _taint_words(node, spec.get("tolerations") or [])
    if taint:
        return taint
    if podlib.gpus_of(spec) > free_gpus:
        return f"Insufficient {podlib.GPU}"
    return None


def place(
    spec: dict[str, Any], nodes: list[dict[str, Any]], pods: list[dict[str, Any]]
) -> tuple[str | None, str]:
    """(the node the pod fits, "") or (None, the scheduler's message saying why none)."""
    taken = podlib.gpus_by_node(pods)
    reasons: Counter[str] = Counter()
    for node in nodes:
        name = str(node["metadata"]["name"])
        why = _refusal(node, spec, podlib.node_gpus(node) - taken.get(name, 0))
        if why is None:
            return name, ""
        reasons[why] += 1
    listed = ", ".join(f"{count} {why}" for why, count in sorted(reasons.items()))
    return None, f"0/{len(nodes)} nodes are available: {listed}." if listed else (
        "0/0 nodes are available."
    )
