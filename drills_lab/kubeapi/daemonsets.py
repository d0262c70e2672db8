"""DaemonSets: one pod on each node the template's nodeSelector picks, as the DaemonSet
controller makes them, and the status it reports.

A node named in the DaemonSet's ``lab.drills.dev/never-ready-on`` annotation
(comma-separated) keeps its pod unready: a device plugin that cannot start there.
"""

from __future__ import annotations

from typing import Any

from drills_lab.kubeapi import pods as podlib
from drills_lab.kubeapi.objects import annotation, dig

NEVER_READY_ON = "lab.drills.dev/never-ready-on"


def wanted_nodes(ds: dict[str, Any], nodes: list[dict[str, Any]]) -> list[str]:
    selector = dig(ds, "spec", "template", "spec", "nodeSelector") or {}
    return [
        n["metadata"]["name"]
        for n in nodes
        if all((n["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
    ]


def never_ready_on(ds: dict[str, Any]) -> set[str]:
    return {n.strip() for n in (annotation(ds, NEVER_READY_ON) or "").split(",") if n.strip()}


def pod_node(pod: dict[str, Any]) -> str:
    return str(dig(pod, "spec", "nodeName") or "")


def status(ds: dict[str, Any], wanted: list[str], pods: list[dict[str, Any]]) -> dict[str, Any]:
    placed = [p for p in pods if pod_node(p) in wanted]
    ready = sum(map(podlib.is_ready, placed))
    return {
        "observedGeneration": int(dig(ds, "metadata", "generation") or 1),
        "desiredNumberScheduled": len(wanted),
        "currentNumberScheduled": len(placed),
        "updatedNumberScheduled": len(placed),
        "numberMisscheduled": len(pods) - len(placed),
        "numberReady": ready,
        "numberAvailable": ready,
        "numberUnavailable": len(wanted) - ready,
    }
