"""A plan in rows a person can read: sites, tiers, datasets, DNS and objectives.

The same facts `drills plan show` prints, shaped as tables for the Plans page.
"""

from __future__ import annotations

from typing import Any

from drills import timefmt
from drills.plan import (
    DrillPlan,
    Rfc2136Dns,
    Route53Dns,
    Tier,
    describe_site,
)


def headline(plan: DrillPlan) -> str:
    """One line, as `drills plan validate` prints after "is valid:"."""
    tiers = ", ".join(f"{len(plan.workloads_in(t))} {t.value}" for t in Tier)
    datasets = len(plan.datasets)
    probes = len(plan.smoke)
    return (
        f"{len(plan.workloads)} workloads ({tiers}), "
        f"{datasets} dataset{'s' if datasets != 1 else ''}, "
        f"{probes} smoke probe{'s' if probes != 1 else ''}"
    )


def sites(plan: DrillPlan) -> list[dict[str, Any]]:
    primary, dr = describe_site(plan.sites.primary), describe_site(plan.sites.dr)
    return [{"": key, "primary": primary[key], "dr": dr[key]} for key in primary]


def tiers(plan: DrillPlan) -> list[dict[str, Any]]:
    rows = []
    for tier in Tier:
        chosen = plan.workloads_in(tier)
        if not chosen:
            continue
        rows.append(
            {
                "tier": tier.value,
                "workloads": ", ".join(w.key + (" (writer)" if w.writer else "") for w in chosen),
                "DR replicas": sum(w.dr_replicas for w in chosen),
                "DR GPUs": plan.dr_gpus(tier),
                "at DR": "stays paused" if tier is Tier.BATCH else "brought up in order",
            }
        )
    return rows


def datasets(plan: DrillPlan) -> list[dict[str, Any]]:
    return [
        {
            "dataset": d.name,
            "kind": d.kind.value,
            "primary → DR": f"{d.primary_bucket} → {d.dr_bucket}",
            "prefix": d.prefix or "(all)",
            "RPO target": timefmt.duration(d.rpo_target),
        }
        for d in plan.datasets
    ]


def dns(plan: DrillPlan) -> list[dict[str, Any]]:
    d = plan.dns
    if isinstance(d, Rfc2136Dns):
        provider = f"RFC 2136, zone {d.zone} on {', '.join(d.servers)}"
    elif isinstance(d, Route53Dns):
        provider = f"Route 53 hosted zone {d.hosted_zone_id}"
    else:
        provider = f"provider {d.provider}"
    return [
        {"": "provider", "value": provider},
        {"": "record", "value": f"{d.record.name} {d.record.type.value}"},
        {"": "switch", "value": f"{d.primary_value} → {d.dr_value}"},
        {"": "max TTL", "value": timefmt.duration(d.max_ttl)},
    ]


def objectives(plan: DrillPlan) -> list[dict[str, Any]]:
    schedule = plan.schedule
    approval = plan.approval
    return [
        {"": "RTO objective", "value": timefmt.duration(plan.objectives.rto)},
        {"": "RPO objective", "value": timefmt.duration(plan.objectives.rpo)},
        {
            "": "schedule in the plan",
            "value": f"{schedule.cron} ({schedule.timezone})" if schedule else "not scheduled",
        },
        {
            "": "approval",
            "value": f"required, times out after {timefmt.duration(approval.timeout)}"
            if approval.required
            else "not required",
        },
        {"": "smoke probes", "value": ", ".join(p.name for p in plan.smoke) or "none"},
    ]
