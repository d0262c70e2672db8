"""What a plan's takeover touches, as words two plans can compare.

A takeover scales workloads on both clusters, closes the primary's ingress, switches a
DNS record and relies on its buckets. Two plans that claim the same one must never run at
once (drills.takeover.lease), and `drills plan validate --all` warns about them ahead.

Each claim names its system the way the plan reaches it, read from the plan alone (no
cluster is asked): a cluster by its API server's URL from the kubeconfig's context, a
DNS record by its name and type (DNS names are global), a bucket by its endpoint and name.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from drills.plan.kubeconfig import KubeconfigError, load_kubeconfig
from drills.plan.models import ControllerFence, DrillPlan, Site

ClaimKind = Literal["workload", "dns", "bucket"]


@dataclass(frozen=True, order=True)
class Claim:
    kind: ClaimKind
    key: str  # e.g. "https://10.0.0.1:6443 serving/Deployment/llm-server"

    def __str__(self) -> str:
        return f"{self.kind} {self.key}"


@dataclass(frozen=True)
class SharedClaim:
    """One target claimed by more than one plan."""

    claim: Claim
    plans: tuple[str, ...]


def cluster_of(plan: DrillPlan, site: Site) -> str:
    """The cluster a site's kubeconfig context points at: its API server's URL."""
    access = site.kubernetes
    if access.in_cluster or access.kubeconfig is None:
        return "in-cluster"
    path = plan.resolve_path(access.kubeconfig)
    try:
        config = load_kubeconfig(path, access.context)
    except (KubeconfigError, OSError):
        return f"kubeconfig {path} context {access.context or '(current)'}"
    return _server(config, access.context) or f"kubeconfig {path} context {access.context}"


def _server(config: dict[str, Any], context: str | None) -> str | None:
    wanted = context or config.get("current-context")
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or []}
    cluster = (contexts.get(wanted) or {}).get("cluster")
    for entry in config.get("clusters") or []:
        if entry.get("name") == cluster:
            server = (entry.get("cluster") or {}).get("server")
            return str(server).rstrip("/") if server else None
    return None


def _bucket(site: Site, bucket: str) -> Claim:
    where = str(site.objects.endpoint_url or f"s3.{site.objects_region}").rstrip("/")
    if site.objects.provider != "s3":  # another provider's store is what its settings say
        settings = json.dumps(site.objects.settings, sort_keys=True, separators=(",", ":"))
        where = f"{site.objects.provider}:{settings}"
    return Claim("bucket", f"{where} {bucket}")


def _workloads(plan: DrillPlan, roles: tuple[str, ...] = ("primary", "dr")) -> Iterator[Claim]:
    for role in roles:
        site: Site = getattr(plan.sites, role)
        cluster = cluster_of(plan, site)
        for w in plan.workloads:
            yield Claim("workload", f"{cluster} {w.namespace}/{w.kind}/{w.name}")
        if role == "primary":
            fence = site.ingress
            if isinstance(fence, ControllerFence):
                d = fence.deployment
                yield Claim("workload", f"{cluster} {d.namespace}/Deployment/{d.name}")
            else:
                for o in fence.objects:
                    yield Claim("workload", f"{cluster} {o.namespace}/Ingress/{o.name}")


def plan_claims(plan: DrillPlan, *, practice: bool = False) -> tuple[Claim, ...]:
    """Every target the plan's takeover touches, each once, in a stable order. A
    ``practice`` touches neither the primary nor the production record: it claims DR's
    workloads, its practice name and the buckets it reads, so that practices of two
    applications that share nothing else run side by side."""
    if practice:
        found: set[Claim] = set(_workloads(plan, ("dr",)))
    else:
        found = set(_workloads(plan))
        found.add(Claim("dns", f"{plan.dns.record.name} {plan.dns.record.type.value}"))
    if plan.practice.record is not None:
        found.add(Claim("dns", f"{plan.practice.record} {plan.dns.record.type.value}"))
    for ds in plan.datasets:
        found.add(_bucket(plan.sites.primary, ds.primary_bucket))
        found.add(_bucket(plan.sites.dr, ds.dr_bucket))
    return tuple(sorted(found))


def shared_claims(
    plans: Sequence[DrillPlan], kinds: Iterable[ClaimKind] = ("workload", "dns", "bucket")
) -> list[SharedClaim]:
    """Targets that more than one plan claims: every kind a run leases, so that a warning
    names each pair of plans whose takeovers refuse each other."""
    wanted = set(kinds)
    owners: dict[Claim, list[str]] = {}
    for plan in plans:
        for claim in plan_claims(plan):
            if claim.kind in wanted:
                owners.setdefault(claim, []).append(plan.name)
    return [
        SharedClaim(claim, tuple(names))
        for claim, names in sorted(owners.items())
        if len(set(names)) > 1
    ]
