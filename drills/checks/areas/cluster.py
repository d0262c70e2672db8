"""Readiness checks of category "Cluster": can the DR cluster take the workloads over?"""

from __future__ import annotations

from collections import Counter
from typing import Any

from drills.checks.areas.cluster_resources import (
    GPU,
    Demand,
    add,
    capacity,
    fetch_workloads,
    node_facts,
    pack_gpus,
    plan_demands,
    shown,
)
from drills.checks.areas.template_diff import template_drift
from drills.checks.base import EXAMPLES, CheckContext, Outcome, Status, check, tier_status, worst
from drills.checks.base import Tier as TierName
from drills.errors import TargetError, unreadable
from drills.plan import Tier
from drills.targets.sites import Targets

DRIVER_FULL = "nvidia.com/cuda.driver-version.full"
DRIVER_MAJOR = "nvidia.com/cuda.driver.major"
CUDA_FULL = "nvidia.com/cuda.runtime-version.full"


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


UNLABELLED = "(unlabelled)"


def _versions(nodes: list[Any]) -> tuple[Counter[str], Counter[str]]:
    """How many GPU nodes run each driver and each CUDA version."""
    drivers: Counter[str] = Counter()
    cudas: Counter[str] = Counter()
    for n in nodes:
        if n.gpus <= 0 and n.labels.get("nvidia.com/gpu.present") != "true":
            continue
        drivers[n.labels.get(DRIVER_FULL) or n.labels.get(DRIVER_MAJOR) or UNLABELLED] += 1
        cudas[n.labels.get(CUDA_FULL) or UNLABELLED] += 1
    return drivers, cudas


def _major(version: str) -> str:
    return version.split(".", 1)[0]


def _parity(name: str, primary: Counter[str], dr: Counter[str]) -> tuple[Status, list[str]]:
    """Each DR version must run at the primary too: another major fails, another minor warns.

    A DR GPU node without the label fails when the primary's nodes have it (the
    DR driver is unknown); when neither site labels its nodes it only warns.
    """
    statuses, problems = [Status.PASS], []
    majors = {_major(v) for v in primary if v != UNLABELLED}
    for version in sorted(dr):
        count = dr[version]
        if version == UNLABELLED:
            statuses.append(Status.FAIL if majors else Status.WARN)
            problems.append(f"{count} DR GPU node(s) carry no {name} version label")
        elif version in primary:
            continue
        elif _major(version) not in majors:
            statuses.append(Status.FAIL)
            problems.append(f"{name} {version} on {count} DR node(s): a major the primary lacks")
        else:
            statuses.append(Status.WARN)
            problems.append(f"{name} {version} on {count} DR node(s) differs in minor/patch")
    return worst(statuses), problems


@check(
    "cluster.gpu_driver_parity",
    title="GPU driver parity",
    category="Cluster",
    timeout_s=15,
    reads=(
        "The GPU feature discovery labels (NVIDIA driver and CUDA versions) of the GPU nodes "
        "in both clusters."
    ),
    blocks=(
        "A DR GPU node runs a driver or CUDA major the primary's GPU nodes do not, or carries"
        " no version labels while the primary's do."
    ),
    warns="The same major with another minor or patch.",
    remediation=(
        "Install the primary's NVIDIA driver and CUDA versions on the DR GPU nodes (or "
        "upgrade both sites together), and run GPU feature discovery there."
    ),
)
def cluster_gpu_driver_parity(ctx: CheckContext) -> Outcome:
    """DR GPU nodes run the NVIDIA driver and CUDA versions the primary's GPU nodes run.

    Read from the GPU feature discovery labels (``nvidia.com/cuda.driver-version.full``,
    else ``nvidia.com/cuda.driver.major``; ``nvidia.com/cuda.runtime-version.full``).
    A DR version whose major the primary does not run (or a GPU node without
    labels) fails and blocks: images built for one driver major may not start on
    another. The same major with another minor or patch warns.
    """
    targets = ctx.targets
    p_drivers, p_cuda = _versions([node_facts(n) for n in targets.primary.kube.nodes()])
    d_drivers, d_cuda = _versions([node_facts(n) for n in targets.dr.kube.nodes()])
    evidence: dict[str, Any] = {
        "primary": {"driver": dict(p_drivers), "cuda": dict(p_cuda)},
        "dr": {"driver": dict(d_drivers), "cuda": dict(d_cuda)},
    }
    if not d_drivers:
        status = Status.FAIL if p_drivers else Status.PASS
        summary = "no GPU nodes at DR" + (", but the primary has some" if p_drivers else "")
        return Outcome(
            status,
            summary,
            evidence,
            remediation="Add GPU nodes (with GPU feature discovery) to the DR pool."
            if p_drivers
            else "",
            blocking=status is Status.FAIL,
        )
    s1, driver_problems = _parity("driver", p_drivers, d_drivers)
    s2, cuda_problems = _parity("CUDA", p_cuda, d_cuda)
    problems = driver_problems + cuda_problems
    evidence["problems"] = problems[:EXAMPLES]
    if Status.FAIL in (s1, s2):
        return Outcome(
            Status.FAIL,
            problems[0],
            evidence,
            remediation="Install the primary's driver major on the DR GPU nodes (GPU operator "
            "driver version), or validate the workloads on the DR driver first.",
            blocking=True,
        )
    if problems:
        return Outcome(
            Status.WARN,
            problems[0],
            evidence,
            remediation="Align the DR driver/CUDA minor with the primary's at the next node "
            "image rollout.",
        )
    drivers = ", ".join(sorted(d_drivers))
    return Outcome(Status.PASS, f"DR GPU nodes match the primary (driver {drivers})", evidence)


@check(
    "cluster.standby_parity",
    title="Standby parity",
    category="Cluster",
    timeout_s=20,
    reads=(
        "Each plan workload's pod template in both clusters (containers, images without the "
        "registry host, resources, env names, ports, command, args)."
    ),
    blocks=(
        "A critical workload is missing at DR or its standby's pod template differs from the "
        "primary's."
    ),
    warns="The same for a normal or batch workload.",
    remediation=(
        "Re-apply the primary's manifests to DR (with DR's registry host) so each standby "
        "matches what runs at the primary."
    ),
)
def cluster_standby_parity(ctx: CheckContext) -> Outcome:
    """Every plan workload exists at DR (a standby, at 0 replicas or more) with the primary's
    pod template: container names, images (registry host stripped, since each site pulls
    from its own registry; the primary's read as the plan's images.remap names them at
    DR), resources, env names, ports, command and args.

    Drift means the standby would start something other than what runs today.
    A missing or drifted critical workload fails and blocks; normal or batch warns.
    """
    plan, targets = ctx.plan, ctx.targets
    primary = fetch_workloads(targets, "primary", plan.workloads)
    dr = fetch_workloads(targets, "dr", plan.workloads)
    missing, not_at_primary, drifted = [], [], []
    failing: list[TierName] = []
    for w in plan.workloads:
        p, d = primary[w.key], dr[w.key]
        if d is None:
            missing.append({"workload": w.key, "tier": w.tier.value})
        elif p is None:
            not_at_primary.append({"workload": w.key, "tier": w.tier.value})
        else:
            drifts = template_drift(p, d, plan.images.mapped)
            if not drifts:
                continue
            drifted.append(
                {
                    "workload": w.key,
                    "tier": w.tier.value,
                    "diffs": [x.to_json() for x in drifts[:EXAMPLES]],
                    "diff_count": len(drifts),
                }
            )
        failing.append(w.tier.value)
    status, blocking = tier_status(failing)
    evidence = {
        "compared": len(plan.workloads),
        "missing_at_dr": missing[:EXAMPLES],
        "missing_at_primary": not_at_primary[:EXAMPLES],
        "drifted": drifted[:EXAMPLES],
        "counts": {
            "missing_at_dr": len(missing),
            "missing_at_primary": len(not_at_primary),
            "drifted": len(drifted),
        },
    }
    if status is Status.PASS:
        return Outcome(
            status, f"all {len(plan.workloads)} standbys match the primary's template", evidence
        )
    parts = []
    if missing:
        parts.append(f"{len(missing)} missing at DR ({missing[0]['workload']})")
    if not_at_primary:
        parts.append(f"{len(not_at_primary)} missing at the primary")
    if drifted:
        parts.append(f"{len(drifted)} drifted ({drifted[0]['workload']})")
    return Outcome(
        status,
        "; ".join(parts),
        evidence,
        remediation="Deploy the standbys from the same manifests as the primary (GitOps for "
        "both sites), at 0 replicas at DR, and re-sync the drifted ones.",
        blocking=blocking,
    )
