"""Readiness checks of category "Cluster": can the DR cluster take the workloads over?"""

from __future__ import annotations

from typing import Any

from drills.checks.areas.cluster_resources import (
    GPU,
    Demand,
    add,
    capacity,
    node_facts,
    pack_gpus,
    plan_demands,
    shown,
)
from drills.checks.base import EXAMPLES, CheckContext, Outcome, Status, check
from drills.errors import TargetError, unreadable
from drills.plan import Tier
from drills.targets.sites import Targets


@check(
    "cluster.reachable",
    title="DR cluster reachable",
    category="Cluster",
    timeout_s=15,
    reads=(
        "The Kubernetes API server of the DR cluster (/version); the primary's too, for "
        "information only."
    ),
    blocks=(
        "The DR API server refuses us (credentials, CA); one that cannot be reached, or where"
        " something else answers, is an error and blocks too."
    ),
    warns=(
        "Never: a primary that does not answer is only reported, as in an incident it is "
        "expected to be down."
    ),
    remediation=(
        "Fix the DR kubeconfig (server URL, CA, credentials) and the network path from where "
        "drills runs to the DR API server."
    ),
)
def cluster_reachable(ctx: CheckContext) -> Outcome:
    """The DR cluster's API server answers ``/version`` within the timeout.

    Without it nothing can be scaled up at DR: a DR API that refuses us (credentials,
    CA) fails and blocks; one that cannot be reached, or where something else answers
    (a proxy's 404), is an error, and blocks too. The primary is asked too, for
    information only: in an incident the primary is expected to be down, and the
    takeover goes on without it.
    """
    targets = ctx.targets
    sites: dict[str, Any] = {}
    dr_error: TargetError | None = None
    for role, site in (("dr", targets.dr), ("primary", targets.primary)):
        try:
            kube = site.kube  # building it reads the kubeconfig, which can fail too
            _, _, git = kube.version()
            sites[role] = {"reachable": True, "gitVersion": git, "api": kube.target}
        except TargetError as exc:
            sites[role] = {"reachable": False, "cause": exc.cause, "api": exc.target}
            dr_error = exc if role == "dr" else dr_error
    evidence = {"sites": sites}
    if dr_error is not None:
        return Outcome(
            Status.ERROR if unreadable(dr_error) else Status.FAIL,
            f"DR API unreachable: {dr_error.cause}",
            evidence,
            remediation="Check the DR kubeconfig (server URL, CA, token) and the network path "
            "from here to the DR API server.",
            blocking=True,
        )
    summary = f"DR API answers ({sites['dr']['gitVersion']})"
    if not sites["primary"]["reachable"]:
        summary += "; primary API unreachable (informational: an incident takeover goes on)"
    return Outcome(Status.PASS, summary, evidence)


@check(
    "cluster.version_skew",
    title="Kubernetes version skew",
    category="Cluster",
    timeout_s=15,
    reads="The Kubernetes API servers of both clusters (/version).",
    blocks=(
        "The DR cluster runs another Kubernetes major, or a minor more than one away from the"
        " primary's."
    ),
    warns="Never.",
    remediation=(
        "Upgrade the cluster that is behind until both run the same major and minors at most "
        "one apart."
    ),
)
def cluster_version_skew(ctx: CheckContext) -> Outcome:
    """The DR cluster runs the same Kubernetes major, and a minor within one of the primary's.

    Manifests, admission policies and operators validated against the primary's
    minor can break on a cluster two minors away (removed APIs, changed
    defaults), in the middle of a takeover. A larger skew fails and blocks.
    """
    targets = ctx.targets
    p_major, p_minor, p_git = targets.primary.kube.version()
    d_major, d_minor, d_git = targets.dr.kube.version()
    evidence = {"primary": p_git, "dr": d_git, "minor_skew": abs(d_minor - p_minor)}
    if p_major != d_major or abs(d_minor - p_minor) > 1:
        return Outcome(
            Status.FAIL,
            f"DR runs {d_git}, primary {p_git}: more than one minor apart",
            evidence,
            remediation="Upgrade (or roll back) the DR control plane and nodes to within one "
            "minor of the primary, then re-test the workloads there.",
            blocking=True,
        )
    return Outcome(Status.PASS, f"DR {d_git}, primary {p_git}", evidence)


def _usable_nodes(targets: Targets) -> tuple[list[Any], list[Any]]:
    facts = [node_facts(n) for n in targets.dr.kube.nodes()]
    return facts, [n for n in facts if n.usable]


def _tier(demands: list[Demand], tier: Tier) -> list[Demand]:
    return [d for d in demands if d.workload.tier == tier]


@check(
    "cluster.nodes_ready",
    title="DR nodes ready",
    category="Cluster",
    timeout_s=20,
    reads=(
        "The DR cluster's nodes (Ready, cordoned, allocatable GPUs) and, for GPUs per replica"
        " not in the plan, the workloads' pod templates at the primary (else the DR standby's)."
    ),
    blocks=(
        "A critical replica that requests GPUs cannot be placed on a Ready, uncordoned DR GPU"
        " node, or no Ready, uncordoned node without GPUs exists."
    ),
    warns="Never.",
    remediation=(
        "Add or repair DR nodes (uncordon them, fix NotReady nodes, scale the node pool) "
        "until the critical tier's DR replicas fit."
    ),
)
def cluster_nodes_ready(ctx: CheckContext) -> Outcome:
    """Enough DR nodes are Ready and schedulable to host the critical tier.

    "Enough" means: every critical replica that requests GPUs can be placed on
    a Ready, schedulable (not cordoned) GPU node with that many allocatable
    GPUs (first-fit, since a pod cannot span nodes), and at least one Ready,
    schedulable node without GPUs exists for everything else. Per-replica GPUs
    come from the plan's ``gpu`` field, else from the primary's pod templates.
    Too few nodes fails and blocks: the critical tier would stay Pending.
    """
    plan, targets = ctx.plan, ctx.targets
    facts, usable = _usable_nodes(targets)
    demands, note = plan_demands(plan, targets)
    replicas = [
        d.gpus_per_replica
        for d in _tier(demands, Tier.CRITICAL)
        for _ in range(d.workload.dr_replicas)
    ]
    gpu_nodes = [n for n in usable if n.gpus > 0]
    cpu_nodes = [n for n in usable if n.gpus == 0]
    used, unplaced = pack_gpus(replicas, (n.gpus for n in gpu_nodes))
    evidence: dict[str, Any] = {
        "ready": sum(n.ready for n in facts),
        "total": len(facts),
        "gpu_nodes": {
            "usable": len(gpu_nodes),
            "total": sum(n.gpus > 0 for n in facts),
            "used_by_critical": used,
        },
        "cpu_nodes": {"usable": len(cpu_nodes), "total": sum(n.gpus == 0 for n in facts)},
        "critical_gpu_replicas": sum(1 for g in replicas if g > 0),
        "unplaced_gpu_replicas": unplaced,
        "not_ready": [n.name for n in facts if not n.ready][:EXAMPLES],
        "cordoned": [n.name for n in facts if n.ready and not n.schedulable][:EXAMPLES],
    }
    if note:
        evidence["requests_from"] = f"DR standbys (primary unreadable: {note})"
    counts = f"{evidence['ready']}/{len(facts)} nodes Ready"
    problems = []
    if unplaced:
        problems.append(f"{unplaced} critical GPU replica(s) fit on no usable GPU node")
    if not cpu_nodes:
        problems.append("no Ready, schedulable non-GPU node")
    if problems:
        return Outcome(
            Status.FAIL,
            f"{counts}; " + "; ".join(problems),
            evidence,
            remediation="Bring DR nodes back to Ready (kubelet, network), uncordon them, or add "
            "GPU nodes to the DR pool before a takeover needs them.",
            blocking=True,
        )
    return Outcome(Status.PASS, f"{counts}; enough for the critical tier", evidence)


@check(
    "cluster.gpu_capacity",
    title="DR GPU capacity",
    category="Cluster",
    timeout_s=20,
    reads=(
        "The DR cluster's Ready, uncordoned nodes (allocatable GPUs, CPU, memory) and the "
        "workloads' pod templates at the primary (the DR standby's if the primary cannot be "
        "read)."
    ),
    blocks=(
        "The critical tier at DR replicas does not fit in the allocatable GPUs, CPU or memory."
    ),
    warns="The critical tier fits but not once the normal tier is added.",
    remediation=(
        "Add DR capacity (nodes, GPUs) or lower the plan's dr_replicas for the tiers that do "
        "not fit."
    ),
)
def cluster_gpu_capacity(ctx: CheckContext) -> Outcome:
    """Allocatable GPUs, CPU and memory on usable DR nodes cover the critical tier at DR replicas.

    Requests are read from each workload's pod template at the primary (the
    standby's at DR if the primary cannot be read) times the plan's
    ``dr_replicas``; the plan's ``gpu`` field, when set, wins for GPUs. Nodes
    count when Ready and not cordoned. A shortfall for the critical tier fails
    and blocks; one that appears only once the normal tier is added warns.
    This compares allocatable capacity, not what other pods at DR already use.
    """
    plan, targets = ctx.plan, ctx.targets
    _, usable = _usable_nodes(targets)
    have = capacity(usable)
    demands, note = plan_demands(plan, targets)
    critical = add(_tier(demands, Tier.CRITICAL))
    with_normal = add(_tier(demands, Tier.CRITICAL) + _tier(demands, Tier.NORMAL))
    short_critical = [r for r, amount in critical.items() if amount > have.get(r, 0)]
    short_normal = [r for r, amount in with_normal.items() if amount > have.get(r, 0)]
    evidence: dict[str, Any] = {
        "allocatable": shown(have),
        "usable_nodes": len(usable),
        "critical": shown(critical),
        "critical_and_normal": shown(with_normal),
        "short_for_critical": short_critical,
        "short_for_normal": short_normal,
        "unknown_requests": [d.workload.key for d in demands if d.source == "unknown"][:EXAMPLES],
    }
    if note:
        evidence["requests_from"] = f"DR standbys (primary unreadable: {note})"
    gpus = f"{int(critical[GPU])} GPUs needed by the critical tier, {int(have[GPU])} allocatable"
    if short_critical:
        return Outcome(
            Status.FAIL,
            f"DR cannot host the critical tier: short of {', '.join(short_critical)} ({gpus})",
            evidence,
            remediation="Add GPU/CPU capacity to the DR pool (or reserve it), or lower the "
            "critical tier's dr_replicas in the plan if it can run smaller.",
            blocking=True,
        )
    if short_normal:
        return Outcome(
            Status.WARN,
            f"critical tier fits ({gpus}); the normal tier would be short of "
            f"{', '.join(short_normal)}",
            evidence,
            remediation="Plan for the normal tier to wait for capacity at DR, or add capacity.",
        )
    return Outcome(Status.PASS, f"critical and normal tiers fit ({gpus})", evidence)
