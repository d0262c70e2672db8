"""Readiness checks of category "Cluster": does DR run what the primary runs? The GPU
driver and CUDA versions of its GPU nodes, and each standby's pod template."""

from __future__ import annotations

from collections import Counter
from typing import Any

from drills.checks.areas.cluster_resources import fetch_workloads, node_facts
from drills.checks.areas.template_diff import template_drift
from drills.checks.base import EXAMPLES, CheckContext, Outcome, Status, check, tier_status, worst
from drills.checks.base import Tier as TierName

DRIVER_FULL = "nvidia.com/cuda.driver-version.full"
DRIVER_MAJOR = "nvidia.com/cuda.driver.major"
CUDA_FULL = "nvidia.com/cuda.runtime-version.full"

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
