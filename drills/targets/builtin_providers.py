"""drills's own providers, registered in pyproject.toml's ``drills.providers`` entry points
exactly as a third-party package registers one (see docs/how-to/providers.md)."""

from __future__ import annotations

from typing import Any

from drills.errors import PermanentError
from drills.targets.provider_api import Provider, ProviderContext

# The readiness checks that read through each kind of store.
OBJECT_CHECKS = (
    "data.replicated",
    "data.rpo",
    "data.checkpoint_fresh",
    "data.delete_protection",
    "data.dr_writable",
)
REGISTRY_CHECKS = ("images.synced",)
SECRET_CHECKS = ("secrets.synced", "secrets.rotation", "secrets.distinct_credentials")
DNS_CHECKS = ("dns.ttl", "dns.control")


def _site(where: ProviderContext) -> Any:
    if where.site is None:
        raise PermanentError(f"provider for {where.role}", "needs a site, and was given none")
    return where.site


def _s3(where: ProviderContext) -> Any:
    from drills.targets.objects import ObjectStore

    return ObjectStore.for_site(where.role, _site(where), where.plan)


def _azure_blob(where: ProviderContext) -> Any:
    from drills.targets.objects import AzureBlobStore, client_for

    return AzureBlobStore(client_for(where), where.role)


def _registry(where: ProviderContext) -> Any:
    from drills.targets.registry import registry_for

    return registry_for(where.role, _site(where), where.plan)


def _aws_secrets(where: ProviderContext) -> Any:
    from drills.targets.secrets import AwsSecrets

    return AwsSecrets.for_site(where.role, _site(where), where.plan)


def _dns(where: ProviderContext) -> Any:
    from drills.targets.dns import DEFAULT_TIMEOUT_S, dns_for

    return dns_for(where.plan, timeout_s=where.timeout_s or DEFAULT_TIMEOUT_S)


def _external_dns(where: ProviderContext) -> Any:
    from drills.targets.dns import DEFAULT_TIMEOUT_S, external_dns_for

    return external_dns_for(where.plan, timeout_s=where.timeout_s or DEFAULT_TIMEOUT_S)


S3 = Provider(
    "objects",
    _s3,
    "Amazon S3 and S3-compatible stores (MinIO, Ceph RGW...): versions, lifecycle, "
    "inventory reports, the DR-writable canary.",
    checks=OBJECT_CHECKS,
)
AZURE_BLOB = Provider(
    "objects",
    _azure_blob,
    "Azure Blob Storage (and Azurite): containers, Content-MD5 and Last-Modified, blob "
    "versions or soft delete for add-only, the DR-writable canary.",
    checks=OBJECT_CHECKS,
)
OCI = Provider(
    "registry",
    _registry,
    "Any OCI Distribution v2 registry (distribution, Harbor, Quay, Artifactory...): "
    "manifest digests by HEAD.",
    checks=REGISTRY_CHECKS,
)
ECR = Provider(
    "registry",
    _registry,
    "Amazon ECR: manifest digests by BatchGetImage.",
    checks=REGISTRY_CHECKS,
)
AWS_SECRETS_MANAGER = Provider(
    "secrets",
    _aws_secrets,
    "AWS Secrets Manager and its DR-region replicas: values by keyed fingerprint, rotation dates.",
    checks=SECRET_CHECKS,
)
_DNS_TAKEOVER = {"switch": True, "confirm": True, "undo": True}
RFC2136 = Provider(
    "dns",
    _dns,
    "Dynamic updates (RFC 2136) signed with TSIG, confirmed on every authoritative server "
    "by SOA serial and answer (BIND, PowerDNS, Knot...).",
    checks=DNS_CHECKS,
    **_DNS_TAKEOVER,
)
ROUTE53 = Provider(
    "dns",
    _dns,
    "Amazon Route 53: a change confirmed INSYNC and on every name server.",
    checks=DNS_CHECKS,
    **_DNS_TAKEOVER,
)
EXTERNAL_DNS = Provider(
    "dns",
    _external_dns,
    "external-dns, and through it any of its DNS providers (Cloudflare, Google Cloud DNS, "
    "Azure DNS...): drills writes its DNSEndpoint or a Service/Ingress annotation, confirms "
    "on every authoritative server, and proves its TXT registry owner.",
    checks=DNS_CHECKS,
    **_DNS_TAKEOVER,
)
