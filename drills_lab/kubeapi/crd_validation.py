"""Validation of the CRDs the lab serves, as their OpenAPI schemas enforce it on a real
server: external-dns's DNSEndpoint and External Secrets Operator's ExternalSecret."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drills_lab.kubeapi.objects import dig

Causes = list[tuple[str, str]]

_RECORD_TYPES = ("A", "AAAA", "CNAME", "TXT", "NS", "MX", "SRV", "PTR", "NAPTR", "CAA")
_STORE_KINDS = ("SecretStore", "ClusterSecretStore")


def _dns_endpoint(obj: dict[str, Any]) -> Causes:
    endpoints = dig(obj, "spec", "endpoints")
    if endpoints is None:
        return []
    if not isinstance(endpoints, list):
        return [("spec.endpoints", "Invalid value: must be an array")]
    causes: Causes = []
    for i, ep in enumerate(endpoints):
        at = f"spec.endpoints[{i}]"
        if not isinstance(ep, dict):
            causes.append((at, "Invalid value: must be an object"))
            continue
        if not isinstance(ep.get("dnsName"), str) or not ep["dnsName"]:
            causes.append((f"{at}.dnsName", "Required value"))
        rtype = ep.get("recordType")
        if rtype is not None and rtype not in _RECORD_TYPES:
            causes.append((f"{at}.recordType", f'Unsupported value: "{rtype}"'))
        targets = ep.get("targets")
        if targets is not None and (
            not isinstance(targets, list) or not all(isinstance(t, str) for t in targets)
        ):
            causes.append((f"{at}.targets", "Invalid value: must be an array of strings"))
        ttl = ep.get("recordTTL")
        if ttl is not None and (not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0):
            causes.append((f"{at}.recordTTL", f"Invalid value: {ttl!r}: must be an integer >= 0"))
    return causes


def _external_secret(obj: dict[str, Any]) -> Causes:
    causes: Causes = []
    ref = dig(obj, "spec", "secretStoreRef")
    if not isinstance(ref, dict) or not ref.get("name"):
        causes.append(("spec.secretStoreRef.name", "Required value"))
    elif ref.get("kind", "SecretStore") not in _STORE_KINDS:
        causes.append(("spec.secretStoreRef.kind", f'Unsupported value: "{ref.get("kind")}"'))
    interval = dig(obj, "spec", "refreshInterval")
    if interval is not None and not isinstance(interval, str):
        causes.append(("spec.refreshInterval", "Invalid value: must be a duration string"))
    return causes


CRD_VALIDATORS: dict[str, Callable[[dict[str, Any]], Causes]] = {
    "dnsendpoints": _dns_endpoint,
    "externalsecrets": _external_secret,
}
