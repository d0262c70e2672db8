"""A plan seen the other way round: the failback direction, for the readiness checks.

Every readiness check asks whether the DR site could take over from the primary. Asked
of the reversed plan, the same checks ask whether the primary could take back over from
DR: its cluster and GPU capacity, its registry, every object written at DR readable at
the primary (the buckets swap too), its secrets, and the DNS switch back. One set of
checks, both directions, no copy of their logic.
"""

from __future__ import annotations

from drills.plan.models import DrillPlan, Sites


def reversed_plan(plan: DrillPlan) -> DrillPlan:
    """``plan`` with the sites, the dataset buckets and the DNS values swapped.

    Workloads keep their ``dr_replicas``: the capacity the site taking over must have is
    what served at DR. Where the plan came from (for relative paths) is kept.
    """
    sites = Sites.model_construct(primary=plan.sites.dr, dr=plan.sites.primary)
    datasets = tuple(
        ds.model_copy(update={"primary_bucket": ds.dr_bucket, "dr_bucket": ds.primary_bucket})
        for ds in plan.datasets
    )
    dns = plan.dns.model_copy(
        update={"primary_value": plan.dns.dr_value, "dr_value": plan.dns.primary_value}
    )
    return plan.model_copy(update={"sites": sites, "datasets": datasets, "dns": dns})


__all__ = ["reversed_plan"]
