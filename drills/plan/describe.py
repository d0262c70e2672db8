"""A site in words, as `drills plan show` prints it and the Plans page shows it: one
description, so the two never drift, with every URL redacted (a URL may carry a token)."""

from __future__ import annotations

from drills.plan.models import ControllerFence, EcrRegistry, OciRegistry, Site
from drills.text import redact_url


def describe_site(site: Site) -> dict[str, str]:
    """Its Kubernetes API, registry, object storage, fence and endpoint, by row name."""
    k8s = site.kubernetes
    reg = site.registry
    if isinstance(reg, EcrRegistry):
        registry = f"ECR {reg.registry_id} ({site.registry_region})"
    elif isinstance(reg, OciRegistry):
        registry = f"OCI {redact_url(reg.url)}" + (" (with auth)" if reg.auth else "")
    else:
        registry = f"provider {reg.provider}"
    fence = site.ingress
    if isinstance(fence, ControllerFence):
        fencing = f"scale ingress controller {fence.deployment} to 0"
    else:
        fencing = "close Ingress " + ", ".join(str(o) for o in fence.objects)
    storage = redact_url(site.objects.endpoint_url) if site.objects.endpoint_url else "AWS S3"
    storage = f"{storage} ({site.objects_region})"
    if site.objects.provider != "s3":  # its settings are its own, never shown here
        storage = f"provider {site.objects.provider}"
    kubernetes = (
        "in-cluster"
        if k8s.in_cluster
        else f"context {k8s.context or '(current)'} in {k8s.kubeconfig}"
    )
    return {
        "kubernetes": kubernetes,
        "registry": registry,
        "object storage": storage,
        "fence": fencing,
        "endpoint": redact_url(site.endpoint),
    }


__all__ = ["describe_site"]
