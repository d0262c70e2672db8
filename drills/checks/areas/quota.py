"""Readiness check of category "Cluster": do the DR namespaces' ResourceQuotas leave room?

A namespace ResourceQuota sized for idle standbys makes the API server refuse the
takeover's new pods ("exceeded quota"), whatever the nodes and queues hold.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

from drills.checks.areas.cluster_resources import (
    GPU,
    ZERO,
    fetch_workloads,
    plan_demands,
    taken_over,
)
from drills.checks.base import EXAMPLES, CheckContext, Outcome, Status, check, tier_status
from drills.checks.base import Tier as TierName
from drills.targets.kube import parse_quantity, resource_quotas

# The quota names that count a pod's requests, as the quota admission plugin names them.
_QUOTA_NAMES = {
    "cpu": ("requests.cpu", "cpu"),
    "memory": ("requests.memory", "memory"),
    GPU: (f"requests.{GPU}",),
}


def _added(ctx: CheckContext) -> dict[str, dict[str, Decimal]]:
    """Per namespace, what the takeover adds at DR: the DR replicas not yet running, by
    resource and as pods, critical first (``critical`` and ``with_normal`` totals)."""
    demands, _ = plan_demands(ctx.plan, ctx.targets)
    by_key = {d.workload.key: d for d in demands}
    current = fetch_workloads(ctx.targets, "dr", taken_over(ctx.plan))
    added: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(lambda: ZERO))
    for w in taken_over(ctx.plan):
        running = int(((current.get(w.key) or {}).get("spec") or {}).get("replicas") or 0)
        more = max(0, w.dr_replicas - running)
        totals = added[w.namespace]
        for tier_total in (("critical",) if w.tier.value == "critical" else ()) + ("with_normal",):
            for name, amount in by_key[w.key].per_replica.items():
                totals[f"{tier_total}:{name}"] += amount * more
            totals[f"{tier_total}:pods"] += more
    return {ns: dict(t) for ns, t in added.items()}


def _left(quota: dict[str, Any], key: str) -> Decimal | None:
    hard = (quota.get("spec") or {}).get("hard") or {}
    if key not in hard:
        return None
    used = ((quota.get("status") or {}).get("used") or {}).get(key, "0")
    return parse_quantity(hard[key]) - parse_quantity(used)


def _namespace_problems(
    namespace: str, added: dict[str, Decimal], quotas: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], set[TierName]]:
    rows, failing = [], set[TierName]()
    for quota in quotas:
        for resource, names in (*_QUOTA_NAMES.items(), ("pods", ("pods",))):
            for key in names:
                left = _left(quota, key)
                if left is None:
                    continue
                for tier, tier_key in (("critical", "critical"), ("normal", "with_normal")):
                    need = added.get(f"{tier_key}:{resource}", ZERO)
                    if need > left:
                        failing.add(tier)  # type: ignore[arg-type]
                        rows.append({"quota": f"{namespace}/{quota['metadata']['name']}",
                                     "resource": key, "left": str(left), "needed": str(need),
                                     "tier": tier})  # fmt: skip
                        break
    return rows, failing


@check(
    "cluster.resource_quota",
    title="Namespace quotas at DR",
    category="Cluster",
    reads=(
        "The ResourceQuotas of each DR namespace (spec.hard, status.used), the workloads "
        "running at DR and their per-replica requests."
    ),
    blocks=(
        "A DR namespace's quotas leave too little room for the critical tier's added replicas."
    ),
    warns="The room runs out only once the normal tier is added.",
    remediation=(
        "Raise the DR namespace's ResourceQuota (cpu, memory, nvidia.com/gpu, pods) to hold "
        "the DR replicas."
    ),
)
def cluster_resource_quota(ctx: CheckContext) -> Outcome:
    """The ResourceQuotas of each DR namespace leave room for the DR replicas a takeover adds.

    What is left is ``spec.hard`` minus ``status.used`` for ``requests.cpu``/``cpu``,
    ``requests.memory``/``memory``, ``requests.nvidia.com/gpu`` and ``pods``; what is
    added is each taken-over workload's DR replicas not already running, times its
    per-replica requests. Too little room for the critical tier fails and blocks; room
    that runs out only once the normal tier is added warns.
    """
    added = _added(ctx)
    rows: list[dict[str, Any]] = []
    failing: set[TierName] = set()
    counted = 0
    for namespace in sorted(added):
        quotas = resource_quotas(ctx.targets.dr.kube, namespace)
        counted += len(quotas)
        ns_rows, ns_failing = _namespace_problems(namespace, added[namespace], quotas)
        rows += ns_rows
        failing |= ns_failing
    status, blocking = tier_status(failing)
    evidence = {"namespaces": sorted(added), "quotas": counted, "short": rows[:EXAMPLES]}
    if status is Status.PASS:
        return Outcome(
            status, f"{counted} quota(s) in {len(added)} namespace(s) leave room", evidence
        )
    first = rows[0]
    return Outcome(
        status,
        f"{first['quota']}: {first['left']} {first['resource']} left, the {first['tier']} "
        f"tier needs {first['needed']}",
        evidence,
        remediation="Raise the DR namespace's ResourceQuota (spec.hard) to cover the DR "
        "replicas, or free what the quota counts as used.",
        blocking=blocking,
    )
