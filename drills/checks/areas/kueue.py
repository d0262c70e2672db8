"""Readiness check of category "Cluster": would Kueue admit the takeover's workloads at DR?

A workload labelled ``kueue.x-k8s.io/queue-name`` is admitted only within its
ClusterQueue's quota: a DR ClusterQueue sized for the idle standby keeps the
takeover's pods gated however many GPUs the nodes have.

Quota is counted as Kueue counts it (``kueue.x-k8s.io/v1beta1``): per resource, the
sum over the ClusterQueue's flavors of ``nominalQuota``, minus what it already uses
(``status.flavorsUsage``), plus what it may borrow from its cohort (``spec.cohort``,
or ``cohortName`` in v1beta2): the other members' unused nominal quota, each capped
by its ``lendingLimit``, the total capped by this queue's ``borrowingLimit``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from drills.checks.areas.cluster_resources import (
    RESOURCES,
    ZERO,
    Demand,
    Resources,
    Templates,
    add,
    demand_of,
    plan_templates,
    shown,
    taken_over,
)
from drills.checks.base import EXAMPLES, CheckContext, Outcome, Status, check
from drills.plan import Tier, Workload
from drills.targets.kube import QUEUE_LABEL, cluster_queues, local_queue, parse_quantity

INFINITE = Decimal("Infinity")


def _quota(cq: Mapping[str, Any], field: str, default: Decimal) -> Resources:
    """Per resource, the sum over flavors of ``field`` (``nominalQuota``, ``borrowingLimit``,
    ``lendingLimit``); ``default`` where a flavor leaves it unset."""
    total: Resources = defaultdict(lambda: ZERO)
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                value = res.get(field)
                amount = parse_quantity(value) if value is not None else default
                total[str(res.get("name"))] += amount
    return dict(total)


def _usage(cq: Mapping[str, Any]) -> Resources:
    total: Resources = defaultdict(lambda: ZERO)
    for flavor in (cq.get("status") or {}).get("flavorsUsage") or []:
        for res in flavor.get("resources") or []:
            total[str(res.get("name"))] += parse_quantity(res.get("total") or 0)
    return dict(total)


def cohort_of(cq: Mapping[str, Any]) -> str | None:
    spec = cq.get("spec") or {}
    return spec.get("cohort") or spec.get("cohortName") or None


def available(name: str, queues: Mapping[str, Mapping[str, Any]]) -> Resources:
    """What the ClusterQueue could admit now, per resource, borrowing included."""
    cq = queues[name]
    nominal, used = _quota(cq, "nominalQuota", ZERO), _usage(cq)
    own = {r: max(ZERO, nominal.get(r, ZERO) - used.get(r, ZERO)) for r in RESOURCES}
    cohort = cohort_of(cq)
    if cohort is None:
        return own
    lendable: Resources = dict.fromkeys(RESOURCES, ZERO)
    for other_name, other in queues.items():
        if other_name == name or cohort_of(other) != cohort:
            continue
        o_nominal, o_used = _quota(other, "nominalQuota", ZERO), _usage(other)
        o_lend = _quota(other, "lendingLimit", INFINITE)
        for r in RESOURCES:
            unused = max(ZERO, o_nominal.get(r, ZERO) - o_used.get(r, ZERO))
            lendable[r] += min(unused, o_lend.get(r, INFINITE))
    borrow_limit = _quota(cq, "borrowingLimit", INFINITE)
    return {r: own[r] + min(lendable[r], borrow_limit.get(r, INFINITE)) for r in RESOURCES}


def queue_of(found: Templates, w: Workload) -> str | None:
    """The LocalQueue the workload (or its pod template) names; None when it uses no Kueue."""
    obj = found.objects.get(w.key) or {}
    labels = {**((obj.get("metadata") or {}).get("labels") or {}),
              **((found.template(w).get("metadata") or {}).get("labels") or {})}  # fmt: skip
    queue = labels.get(QUEUE_LABEL)
    return str(queue) if queue else None


def _queued(ctx: CheckContext) -> dict[tuple[str, str], list[Demand]]:
    """(namespace, LocalQueue) → the demands of the taken-over workloads that name it."""
    found = plan_templates(ctx.plan, ctx.targets)
    queued: dict[tuple[str, str], list[Demand]] = defaultdict(list)
    for w in taken_over(ctx.plan):
        queue = queue_of(found, w)
        if queue is not None and w.dr_replicas > 0:
            obj = found.objects.get(w.key)
            queued[(w.namespace, queue)].append(demand_of(w, obj, found.sources[w.key]))
    return dict(queued)


def _short(need: Resources, have: Resources) -> list[str]:
    return [r for r in RESOURCES if need.get(r, ZERO) > have.get(r, ZERO)]


def _queue_problems(
    ctx: CheckContext, queued: dict[tuple[str, str], list[Demand]]
) -> tuple[list[dict[str, Any]], set[str]]:
    """Per ClusterQueue: what the critical tier, then critical and normal, need against it."""
    queues = cluster_queues(ctx.targets.dr.kube)
    per_cq: dict[str, list[Demand]] = defaultdict(list)
    rows: list[dict[str, Any]] = []
    failing: set[str] = set()
    for (namespace, lq_name), demands in sorted(queued.items()):
        lq = local_queue(ctx.targets.dr.kube, namespace, lq_name)
        cq_name = str(((lq or {}).get("spec") or {}).get("clusterQueue") or "")
        if lq is None or cq_name not in queues:
            what = "LocalQueue" if lq is None else f"ClusterQueue {cq_name or '(none)'}"
            rows.append({"queue": f"{namespace}/{lq_name}", "problem": f"{what} missing at DR"})
            failing.update(d.workload.tier.value for d in demands)
            continue
        per_cq[cq_name].extend(demands)
    for cq_name, demands in sorted(per_cq.items()):
        have = available(cq_name, queues)
        critical = add([d for d in demands if d.workload.tier is Tier.CRITICAL])
        both = add(demands)
        short_c, short_n = _short(critical, have), _short(both, have)
        row = {"cluster_queue": cq_name, "cohort": cohort_of(queues[cq_name]),
               "available": shown(have), "critical": shown(critical), "with_normal": shown(both),
               "short_for_critical": short_c, "short_for_normal": short_n}  # fmt: skip
        rows.append(row)
        if short_c:
            failing.add("critical")
        elif short_n:
            failing.add("normal")
    return rows, failing


@check(
    "cluster.queue_quota",
    title="Kueue quota at DR",
    category="Cluster",
    reads=(
        "The Kueue queue label of each workload (at the primary, else on the DR standby) and, "
        "at DR, its LocalQueue, "
        "ClusterQueue, cohort and their quotas and usage."
    ),
    blocks=(
        "The critical tier's LocalQueue is missing at DR or its ClusterQueue lacks quota for "
        "the critical DR replicas."
    ),
    warns="The normal tier, counted on top of the critical one, lacks quota or its queue.",
    remediation=(
        "Create the LocalQueue at DR and raise its ClusterQueue's nominal quota (or borrowing"
        " limits) for GPUs, CPU and memory."
    ),
)
def cluster_queue_quota(ctx: CheckContext) -> Outcome:
    """For workloads that use Kueue (the ``kueue.x-k8s.io/queue-name`` label on the workload
    or its pod template), the LocalQueue exists at DR and its ClusterQueue's quota for
    ``nvidia.com/gpu``, CPU and memory covers the tier's DR replicas.

    Available quota is the nominal quota of every flavor minus current usage, plus what
    the queue may borrow from its cohort (the other members' unused nominal quota within
    their lending limits, capped by this queue's borrowing limit), as Kueue counts it.
    The critical tier short of quota (or its queue missing) fails and blocks; the normal
    tier, counted on top of the critical one, warns.
    """
    queued = _queued(ctx)
    if not queued:
        return Outcome(Status.PASS, "no workload of the plan uses Kueue", {"queues": []})
    rows, failing = _queue_problems(ctx, queued)
    evidence = {"queues": rows[:EXAMPLES]}
    if not failing:
        return Outcome(
            Status.PASS, f"Kueue quota at DR covers {len(queued)} queue(s)' DR replicas", evidence
        )
    bad = next(r for r in rows if r.get("problem") or r.get("short_for_critical")
               or r.get("short_for_normal"))  # fmt: skip
    if "problem" in bad:
        summary = f"{bad['queue']}: {bad['problem']}"
    else:
        short = bad["short_for_critical"] or bad["short_for_normal"]
        tier = "critical" if bad["short_for_critical"] else "normal"
        summary = (
            f"ClusterQueue {bad['cluster_queue']} is short of {', '.join(short)} for the {tier} "
            f"tier ({bad['available']['gpu']} GPUs available, "
            f"{bad['critical' if tier == 'critical' else 'with_normal']['gpu']} needed)"
        )
    blocking = "critical" in failing
    return Outcome(
        Status.FAIL if blocking else Status.WARN,
        summary,
        evidence,
        remediation="Raise the DR ClusterQueue's nominalQuota (or let it borrow from its cohort) "
        "to cover the tier's DR replicas, and create the LocalQueues the workloads name.",
        blocking=blocking,
    )


def critical_quota_short(ctx: CheckContext) -> list[str]:
    """The DR queues the critical tier cannot be admitted through now; [] when none."""
    queued = _queued(ctx)
    if not queued:
        return []
    rows, failing = _queue_problems(ctx, queued)
    if "critical" not in failing:
        return []
    return [
        str(r.get("queue") or r.get("cluster_queue"))
        for r in rows
        if r.get("problem") or r.get("short_for_critical")
    ]
