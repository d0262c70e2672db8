"""The DR pool's GPUs, node by node, by what holds them: pure functions over the plain
dicts the Kubernetes API returns (nodes, pods, PriorityClasses).

A GPU is held by the pod that requests it on that node. Each is counted once, in the first
of: the plan's sentinel; a critical or normal plan workload at DR (its warm standby); work
on a PriorityClass below the critical tier's (a takeover can preempt it); anything else.
What nothing holds is idle. "Reserved for the standbys" is every GPU that neither the
sentinel, nor low-priority work, nor other work holds: the plan's warm standbys and the idle
GPUs kept for the takeover.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from drills.checks.areas.cluster_resources import GPU, ZERO, node_facts, pod_requests
from drills.checks.areas.preemptible import pod_owner, pod_priority
from drills.plan import DrillPlan, Tier

UNKNOWN_MODEL = "unknown"
_DONE_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class PoolNode:
    name: str
    model: str
    labels: Mapping[str, str]
    usable: bool  # ready and schedulable: the takeover's pods can land here
    allocatable: int
    standby: int
    sentinel: int
    low_priority: int
    other: int

    @property
    def used(self) -> int:
        return min(self.allocatable, self.standby + self.sentinel + self.low_priority + self.other)

    @property
    def idle(self) -> int:
        return self.allocatable - self.used

    @property
    def reserved(self) -> int:
        return max(0, self.allocatable - self.sentinel - self.low_priority - self.other)


def critical_priority(
    plan: DrillPlan, templates: Mapping[str, Mapping[str, Any]], classes: Mapping[str, int]
) -> int:
    """The lowest priority among the critical tier's pod templates: work below it yields to
    the critical tier when the scheduler preempts."""
    values = [
        classes.get(
            str(((templates.get(w.key) or {}).get("spec") or {}).get("priorityClassName") or ""), 0
        )
        for w in plan.workloads
        if w.tier is Tier.CRITICAL
    ]
    return min(values, default=0)


def pool_nodes(
    plan: DrillPlan,
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    classes: Mapping[str, int],
    critical: int,
) -> list[PoolNode]:
    """Every DR node with GPUs, its GPUs counted by holder (see the module's docstring)."""
    facts = {f.name: f for f in map(node_facts, nodes) if f.gpus > 0}
    held: dict[str, dict[str, int]] = {name: {} for name in facts}
    # The batch tier stays paused in a takeover: running at DR, it is low-priority work.
    plan_keys = {
        (w.namespace, w.kind.value, w.name) for w in plan.workloads if w.tier is not Tier.BATCH
    }
    sentinel = plan.sentinel
    for pod in pods:
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if node not in held or (pod.get("status") or {}).get("phase") in _DONE_PHASES:
            continue
        gpus = int(pod_requests({"spec": spec}).get(GPU, ZERO))
        if gpus <= 0:
            continue
        namespace = str((pod.get("metadata") or {}).get("namespace", ""))
        owner = pod_owner(pod)
        if (
            sentinel is not None
            and owner is not None
            and namespace == sentinel.namespace
            and owner == (sentinel.kind.value, sentinel.name)
        ):
            holder = "sentinel"
        elif owner is not None and (namespace, *owner) in plan_keys:
            holder = "standby"
        elif pod_priority(pod, classes) < critical:
            holder = "low_priority"
        else:
            holder = "other"
        counts = held[node]
        counts[holder] = counts.get(holder, 0) + gpus
    return [
        PoolNode(
            name=f.name,
            model=f.labels.get("nvidia.com/gpu.product") or UNKNOWN_MODEL,
            labels=f.labels,
            usable=f.usable,
            allocatable=f.gpus,
            standby=held[f.name].get("standby", 0),
            sentinel=held[f.name].get("sentinel", 0),
            low_priority=held[f.name].get("low_priority", 0),
            other=held[f.name].get("other", 0),
        )
        for f in sorted(facts.values(), key=lambda f: f.name)
    ]


def priority_classes(items: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """PriorityClass name → value."""
    out: dict[str, int] = {}
    for pc in items:
        name = (pc.get("metadata") or {}).get("name")
        if name and isinstance(pc.get("value"), int):
            out[str(name)] = int(pc["value"])
    return out
