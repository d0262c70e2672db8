"""Where the orchestrator runs: never only inside the site it must rescue.

A process is in a cluster when Kubernetes told it so (KUBERNETES_SERVICE_HOST, set in every
pod). Which cluster is what the operator says in DRILLS_CLUSTER (`primary`, `dr`, or the
name of a neutral site), or, unsaid, what the plan implies: a primary site reached with
`in_cluster: true` is the cluster the process runs in. Workers are named after the cluster
they run in (NAME@CLUSTER, e.g. drills-worker@dr); a worker without @ runs outside any.
"""

from __future__ import annotations

import os

from drills.checks.base import CheckContext, Outcome, Placement, Status, check

PRIMARY = "primary"


def here(role: str) -> Placement:
    """This process's own placement, from its environment (the workers are added above)."""
    in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    cluster = (os.environ.get("DRILLS_CLUSTER") or "").strip() or None
    return Placement(role=role, in_cluster=in_cluster, cluster=cluster if in_cluster else None)


def _cluster_of(ctx: CheckContext, placement: Placement) -> str | None:
    if not placement.in_cluster:
        return None
    if placement.cluster:
        return placement.cluster
    return PRIMARY if ctx.plan.sites.primary.kubernetes.in_cluster else None


def _workers_outside(placement: Placement) -> list[str] | None:
    if placement.workers is None:
        return None
    return [w.name for w in placement.workers if w.online and w.cluster != PRIMARY]


@check(
    "orchestrator.placement",
    title="Orchestrator outside the primary",
    category="Plan",
    timeout_s=5,
    reads=(
        "This process's environment (KUBERNETES_SERVICE_HOST, DRILLS_CLUSTER), the plan's "
        "in_cluster setting and the drills work pool's workers at PREFECT_API_URL."
    ),
    blocks="Never: it fails without blocking when this process runs in the primary cluster.",
    warns=(
        "No worker outside the primary is online, the workers cannot be listed, or this "
        "process is in a cluster it cannot name."
    ),
    remediation=(
        "Run the orchestrator (Prefect server and a worker) outside the primary cluster, "
        "naming workers NAME@CLUSTER and setting DRILLS_CLUSTER."
    ),
)
def orchestrator_placement(ctx: CheckContext) -> Outcome:
    """The worker or dashboard running this check is not inside the primary cluster, and
    at least one worker of the drills work pool is alive outside it: an orchestrator that
    dies with the primary cannot fail it over.

    Fails when this process runs in the primary cluster: KUBERNETES_SERVICE_HOST is set and
    DRILLS_CLUSTER is `primary` (or unset while the plan reaches the primary with
    `in_cluster: true`). Warns when no worker outside the primary is online (workers are
    named NAME@CLUSTER; one without @ is outside every cluster), when the pool's workers
    cannot be listed from PREFECT_API_URL, or when this process is in a cluster it cannot
    name. Without PREFECT_API_URL the process running the check is the orchestrator.
    """
    placement = ctx.placement or here("cli")
    cluster = _cluster_of(ctx, placement)
    evidence: dict[str, object] = {"role": placement.role, "in_cluster": placement.in_cluster,
                                   "cluster": cluster}  # fmt: skip
    if cluster == PRIMARY:
        return Outcome(
            Status.FAIL,
            f"this {placement.role} runs inside the primary cluster: it would go down with it",
            evidence,
            remediation="Run the worker and the dashboard at the DR site or a neutral site "
            "(docs: Where the orchestrator runs), and set DRILLS_CLUSTER there.",
        )
    outside = _workers_outside(placement)
    evidence["workers_outside_primary"] = outside
    if outside is None and placement.workers_error:
        return Outcome(
            Status.WARN,
            f"the work pool's workers could not be listed: {placement.workers_error}",
            evidence,
            remediation="Check PREFECT_API_URL: readiness must see the workers.",
        )
    if outside is None:  # no Prefect to ask: this process is the orchestrator
        outside = [f"this {placement.role}"]
    if not outside:
        return Outcome(
            Status.WARN,
            "no worker outside the primary cluster is online",
            evidence,
            remediation="Start a worker at the DR site or a neutral site.",
        )
    if placement.in_cluster and cluster is None:
        return Outcome(
            Status.WARN,
            f"this {placement.role} runs in a cluster it cannot name",
            evidence,
            remediation="Set DRILLS_CLUSTER (primary, dr or a neutral name).",
        )
    return Outcome(Status.PASS, f"outside the primary; online outside it: {', '.join(outside)}",
                   evidence)  # fmt: skip
