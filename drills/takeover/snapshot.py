"""A snapshot of everything a drill may touch, to prove a failback restored it exactly."""

from __future__ import annotations

from typing import Any

from drills.plan import ControllerFence, DrillPlan
from drills.takeover.steps import job_changes
from drills.takeover.steps.changes import (
    KINDS,
    ingress_address,
    record_address,
    workload_address,
)
from drills.targets.sites import ROLES, Role, Targets

Snapshot = dict[str, Any]


def fence_of(plan: DrillPlan, role: Role) -> list[tuple[str, str]]:
    """The (change kind, address) of what closes a site's ingress: the controller, or
    each Ingress object's class."""
    fence = getattr(plan.sites, role).ingress
    if isinstance(fence, ControllerFence):
        d = fence.deployment
        return [("workload.scale", workload_address(role, "Deployment", d.namespace, d.name))]
    return [("ingress.class", ingress_address(role, o.namespace, o.name)) for o in fence.objects]


def touched(plan: DrillPlan) -> list[tuple[str, str]]:
    """Every (change kind, address) a drill of this plan can change, on both sites."""
    found: list[tuple[str, str]] = []
    for role in ROLES:
        found += fence_of(plan, role)
        for w in plan.workloads:
            found.append(
                ("workload.scale", workload_address(role, str(w.kind), w.namespace, w.name))
            )
    rtype = str(plan.dns.record.type)
    found.append(("dns.record", record_address(plan.dns.record.name, rtype)))
    if plan.practice.record is not None:  # a practice points it at DR, then restores it
        found.append(("dns.name", record_address(plan.practice.record, rtype)))
    # A validation Job exists only during the run: after it, none may be left behind.
    found += [
        (job_changes.KIND, job_changes.job_address("dr", j.namespace, j.name))
        for j in plan.validation_jobs
    ]
    return found


def take(plan: DrillPlan, targets: Targets) -> Snapshot:
    return {address: KINDS[kind].read(targets, address) for kind, address in touched(plan)}


def differences(before: Snapshot, after: Snapshot) -> dict[str, dict[str, Any]]:
    """What changed between two snapshots, by address: empty when equal."""
    return {
        address: {"before": before.get(address), "after": after.get(address)}
        for address in sorted(before.keys() | after.keys())
        if before.get(address) != after.get(address)
    }
