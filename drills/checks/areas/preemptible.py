"""Readiness check "capacity.preemptible": does the work that holds DR's GPUs give them back
when the critical tier needs them?

A DR pool that runs low-priority work (evaluation, data cleaning, small training) between
takeovers is only as ready as that work is preemptible. Kubernetes preempts a pod only for
one of higher priority whose PriorityClass has ``preemptionPolicy: PreemptLowerPriority``;
Kueue evicts an admitted Workload for the critical tier only when the critical tier's
ClusterQueue may (``preemption.withinClusterQueue`` for a Workload in the same queue,
``preemption.reclaimWithinCohort`` for one borrowing in another queue of its cohort).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from drills.checks.areas.cluster_resources import GPU, ZERO, plan_templates, pod_requests
from drills.checks.areas.kueue import INFINITE, _quota, cohort_of
from drills.checks.base import EXAMPLES, CheckContext, Outcome, Status, check
from drills.plan import DrillPlan, Tier
from drills.targets.kube import (
    QUEUE_LABEL,
    KubeTarget,
    cluster_queues,
    local_queue,
    priority_classes,
)

NEVER = "Never"
_DONE_PHASES = frozenset({"Succeeded", "Failed"})
_WITHIN_OK = frozenset({"LowerPriority", "LowerOrNewerEqualPriority"})


def pod_owner(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(kind, name) of the workload behind a pod: a ReplicaSet stands for its Deployment."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if not ref.get("controller"):
            continue
        kind, name = str(ref.get("kind", "")), str(ref.get("name", ""))
        if kind == "ReplicaSet" and "-" in name:
            return "Deployment", name.rsplit("-", 1)[0]
        return kind, name
    return None


def pod_priority(pod: Mapping[str, Any], classes: Mapping[str, int]) -> int:
    spec = pod.get("spec") or {}
    if isinstance(spec.get("priority"), int):
        return int(spec["priority"])  # what admission resolved, when the API server sets it
    return classes.get(str(spec.get("priorityClassName") or ""), 0)


@dataclass
class DrWork:
    """Work at DR outside the plan's takeover that holds (or waits for) GPUs."""

    key: str  # namespace/Kind/name
    priority: int
    priority_class: str
    gpus: int
    queue: str | None


def dr_work(
    plan: DrillPlan, pods: list[dict[str, Any]], classes: Mapping[str, int]
) -> list[DrWork]:
    """Every DR workload that holds GPUs and is not the plan's takeover or its sentinel."""
    ours = {(w.namespace, w.kind.value, w.name) for w in plan.workloads if w.tier is not Tier.BATCH}
    if plan.sentinel is not None:
        s = plan.sentinel
        ours.add((s.namespace, s.kind.value, s.name))
    found: dict[str, DrWork] = {}
    for pod in pods:
        spec = pod.get("spec") or {}
        if (pod.get("status") or {}).get("phase") in _DONE_PHASES or not spec.get("nodeName"):
            continue
        gpus = int(pod_requests({"spec": spec}).get(GPU, ZERO))
        meta = pod.get("metadata") or {}
        owner = pod_owner(pod) or ("Pod", str(meta.get("name", "")))
        namespace = str(meta.get("namespace", ""))
        if gpus <= 0 or (namespace, *owner) in ours:
            continue
        key = f"{namespace}/{owner[0]}/{owner[1]}"
        entry = found.setdefault(
            key,
            DrWork(
                key,
                pod_priority(pod, classes),
                str(spec.get("priorityClassName") or ""),
                0,
                (meta.get("labels") or {}).get(QUEUE_LABEL),
            ),
        )
        entry.gpus += gpus
    return sorted(found.values(), key=lambda w: w.key)


def _critical(ctx: CheckContext, classes: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The critical tier's lowest PriorityClass (name, value, policy) and the Kueue queues
    its workloads name, as (namespace, LocalQueue)."""
    found = plan_templates(ctx.plan, ctx.targets)
    lowest: tuple[int, str] | None = None
    queues: set[tuple[str, str]] = set()
    for w in ctx.plan.workloads_in("critical"):
        template = found.template(w)
        name = str((template.get("spec") or {}).get("priorityClassName") or "")
        value = int((classes.get(name) or {}).get("value") or 0)
        if lowest is None or value < lowest[0]:
            lowest = (value, name)
        labels = {
            **((found.objects.get(w.key) or {}).get("metadata") or {}).get("labels", {}),
            **((template.get("metadata") or {}).get("labels") or {}),
        }
        if QUEUE_LABEL in labels:
            queues.add((w.namespace, str(labels[QUEUE_LABEL])))
    value, name = lowest or (0, "")
    policy = str((classes.get(name) or {}).get("preemptionPolicy") or "PreemptLowerPriority")
    return {"class": name or None, "value": value, "policy": policy, "queues": sorted(queues)}


def yields_below(ctx: CheckContext) -> tuple[int | None, dict[str, int]]:
    """The priority below which DR's pods give their GPUs to the critical tier (None when
    its PriorityClass preempts nothing), and DR's PriorityClass values by name."""
    classes = priority_classes(ctx.targets.dr.kube)
    critical = _critical(ctx, classes)
    values = {n: int(pc.get("value") or 0) for n, pc in classes.items()}
    return (None if critical["policy"] == NEVER else int(critical["value"])), values


def _cluster_queue_of(kube: KubeTarget, namespace: str, queue: str) -> str | None:
    lq = local_queue(kube, namespace, queue)
    return str(((lq or {}).get("spec") or {}).get("clusterQueue") or "") or None


def _borrows_from(mine: Mapping[str, Any], critical: Mapping[str, Any]) -> bool:
    """Whether ``mine`` may borrow GPU quota in the critical ClusterQueue's cohort: what it
    borrows there is what the critical tier's queue would have to reclaim."""
    cohort = cohort_of(critical)
    if cohort is None or cohort_of(mine) != cohort:
        return False
    return _quota(mine, "borrowingLimit", INFINITE).get(GPU, ZERO) > 0


def _queue_problem(
    work: DrWork,
    namespace: str,
    critical_cqs: set[str],
    kube: KubeTarget,
    queues: Mapping[str, dict[str, Any]],
    critical_value: int,
) -> str | None:
    """Why the critical tier's ClusterQueue could not take the work's quota back, if so."""
    if work.queue is None:
        return None
    mine = _cluster_queue_of(kube, namespace, work.queue)
    if mine is None or mine not in queues:
        return None
    for cq in sorted(critical_cqs & set(queues)):
        preemption = (queues[cq].get("spec") or {}).get("preemption") or {}
        if cq == mine:
            within = preemption.get("withinClusterQueue", NEVER)
            if within not in _WITHIN_OK:
                return (
                    f"it shares ClusterQueue {cq} with the critical tier, whose "
                    f"preemption.withinClusterQueue is {within}"
                )
        elif _borrows_from(queues[mine], queues[cq]):
            reclaim = preemption.get("reclaimWithinCohort", NEVER)
            if reclaim == NEVER or (reclaim == "LowerPriority" and work.priority >= critical_value):
                return (
                    f"its ClusterQueue {mine} borrows from cohort {cohort_of(queues[mine])}, "
                    f"and the critical tier's ClusterQueue {cq} cannot reclaim it "
                    f"(preemption.reclaimWithinCohort is {reclaim})"
                )
    return None


@check(
    "capacity.preemptible",
    title="DR's low-priority work yields to the takeover",
    category="Cluster",
    reads=(
        "At DR: the pods holding GPUs that are neither the plan's takeover nor its sentinel, "
        "their priority and Kueue queue; the PriorityClass of the critical tier's pod "
        "templates; the ClusterQueues of both, with their preemption policies and cohort."
    ),
    blocks="Never: the takeover may not need the GPUs the work holds.",
    warns=(
        "Work holding DR GPUs is not preemptible by the critical tier: its priority is not "
        "lower, the critical tier's PriorityClass has preemptionPolicy Never, or its Kueue "
        "quota cannot be reclaimed by the critical tier's ClusterQueue."
    ),
    remediation=(
        "Run DR's low-priority work on a PriorityClass below the critical tier's, keep the "
        "critical class at preemptionPolicy PreemptLowerPriority, and let the critical "
        "tier's ClusterQueue preempt (withinClusterQueue: LowerPriority, "
        "reclaimWithinCohort: Any)."
    ),
)
def capacity_preemptible(ctx: CheckContext) -> Outcome:
    """Every workload at DR that holds GPUs and is not the plan's takeover (nor its
    sentinel) is preemptible by the critical tier: its priority is below the lowest
    PriorityClass of the critical tier's pod templates, that class has
    ``preemptionPolicy: PreemptLowerPriority``, and when the work runs through Kueue, the
    critical tier's ClusterQueue may take its quota back (``withinClusterQueue:
    LowerPriority`` when they share a queue, ``reclaimWithinCohort`` when it borrows in the
    same cohort). Otherwise the takeover waits for GPUs that never come free; the check
    warns and names the workload and why. It never blocks: the GPUs may not be needed.
    """
    kube = ctx.targets.dr.kube
    classes = priority_classes(kube)
    values = {n: int(pc.get("value") or 0) for n, pc in classes.items()}
    critical = _critical(ctx, classes)
    work = dr_work(ctx.plan, kube.pods(None), values)
    evidence: dict[str, Any] = {
        "critical": critical,
        "workloads": len(work),
        "gpus": sum(w.gpus for w in work),
        "not_preemptible": [],
    }
    if not work:
        return Outcome(Status.PASS, "no other work holds DR GPUs", evidence)
    queues = cluster_queues(kube) if any(w.queue for w in work) else {}
    critical_cqs = (
        {cq for ns, q in critical["queues"] if (cq := _cluster_queue_of(kube, ns, q)) is not None}
        if queues
        else set()
    )
    problems: list[dict[str, Any]] = []
    for w in work:
        why: list[str] = []
        if w.priority >= critical["value"]:
            why.append(
                f"its priority {w.priority} ({w.priority_class or 'no class'}) is not "
                f"below the critical tier's {critical['value']} ({critical['class']})"
            )
        elif critical["policy"] == NEVER:
            why.append(
                f"the critical tier's PriorityClass {critical['class']} has preemptionPolicy Never"
            )
        namespace = w.key.split("/", 1)[0]
        queue_why = _queue_problem(w, namespace, critical_cqs, kube, queues, critical["value"])
        if queue_why:
            why.append(queue_why)
        if why:
            problems.append({"workload": w.key, "gpus": w.gpus, "why": why})
    evidence["not_preemptible"] = problems[:EXAMPLES]
    if not problems:
        return Outcome(
            Status.PASS,
            f"{len(work)} workload(s) holding {evidence['gpus']} DR "
            "GPUs yield to the critical tier",
            evidence,
        )
    first = problems[0]
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return Outcome(
        Status.WARN,
        f"{first['workload']} holds {first['gpus']} DR GPU(s) and is not preemptible by the "
        f"critical tier: {'; '.join(first['why'])}{more}",
        evidence,
        remediation="Move the work to a PriorityClass below the critical tier's (e.g. "
        "`priorityClassName: drills-batch`), or set its ClusterQueue's preemption so the "
        "critical tier can take the quota back.",
    )
