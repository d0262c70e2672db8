"""external-dns as the DNS provider: drills writes the resource external-dns reads, in the
cluster where it runs, and external-dns changes the zone at whichever of its 30+ DNS
providers the zone lives.

A switch writes the record's targets into the plan's ``DNSEndpoint`` (externaldns.k8s.io,
the crd source) or into the annotation of a Service or Ingress. It is confirmed as every
provider's is: on each authoritative server of the zone, read directly (so the RTO
includes external-dns's own sync interval). Its undo puts the resource's part back as it
was, byte for byte, and waits until the servers answer what it holds again.

external-dns changes only records its TXT registry says it owns, and two instances with
different ``--txt-owner-id`` on one zone fight over a record, each reverting the other.
``check_control`` therefore proves both that the resource can be patched (a server-side
dry run) and that the registry entry names the plan's owner and resource.
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass
from typing import Any

from drills.errors import PermanentError, TemporaryError
from drills.plan import DrillPlan, ExternalDnsController
from drills.targets.dns.records import (
    DEFAULT_TIMEOUT_S,
    ChangeResult,
    DnsTarget,
    RecordAnswer,
    normalize_name,
    normalize_value,
)
from drills.targets.dns.rfc2136 import Rfc2136Target
from drills.targets.kube import KubeTarget

log = logging.getLogger("drills.targets.dns")

GROUP_VERSION = "externaldns.k8s.io/v1alpha1"
PATHS = {
    "DNSEndpoint": f"/apis/{GROUP_VERSION}/namespaces/{{namespace}}/dnsendpoints/{{name}}",
    "Service": "/api/v1/namespaces/{namespace}/services/{name}",
    "Ingress": "/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses/{name}",
}
TTL_ANNOTATION = "external-dns.alpha.kubernetes.io/ttl"
HERITAGE = "external-dns"
OWNER_LABEL = "external-dns/owner"
RESOURCE_LABEL = "external-dns/resource"
# Beyond its sync interval, what external-dns may take to apply a change (its provider's
# API call, the zone's transfer to the secondaries) before an undo is reported as stuck.
APPLY_GRACE_S = 30.0


def txt_names(name: str, rtype: str, prefix: str = "") -> tuple[str, str]:
    """The registry's two TXT names for a record, as external-dns's registry/txt.go maps
    them: the new format (``<prefix><type>-<first label>.<rest>``) and the old one
    (``<prefix><first label>.<rest>``)."""
    first, _, rest = name.rstrip(".").partition(".")
    tail = f".{rest}." if rest else "."
    prefix = prefix.lower()
    return f"{prefix}{rtype.lower()}-{first}{tail}", f"{prefix}{first}{tail}"


def parse_labels(text: str) -> dict[str, str] | None:
    """A registry TXT value's labels (``heritage=external-dns,external-dns/owner=…``), or
    None when it is not external-dns's (no heritage first, as NewLabelsFromString wants)."""
    pairs = [part.split("=", 1) for part in text.strip().strip('"').split(",")]
    if not pairs or pairs[0] != ["heritage", HERITAGE]:
        return None
    return {pair[0]: pair[1] for pair in pairs[1:] if len(pair) == 2}


@dataclass(frozen=True)
class Ownership:
    """What the TXT registry says about a record, read on one authoritative server."""

    txt_name: str
    owner: str
    resource: str


def _external_value(rtype: str, value: str) -> str:
    """A target as external-dns writes it: names without the trailing dot."""
    text = normalize_value(rtype, value)
    return text.rstrip(".") if rtype.upper() == "CNAME" else text


class ExternalDnsTarget(DnsTarget):
    """The plan's record, written through external-dns's resource and read on the zone."""

    def __init__(self, config: ExternalDnsController, kube: KubeTarget, reader: Rfc2136Target):
        self.config = config
        self.kube = kube
        self.reader = reader
        self.poll_interval_s = reader.poll_interval_s
        res = config.resource
        self.resource_name = f"{res.kind} {res.namespace}/{res.name}"
        self.target = (
            f"external-dns {self.resource_name} at {config.site} (owner {config.owner_id}), "
            f"zone {config.zone} on {', '.join(config.servers)}"
        )
        self._params = {"namespace": res.namespace, "name": res.name}
        self._path = PATHS[res.kind]

    def __repr__(self) -> str:
        return f"ExternalDnsTarget({self.target!r})"

    # -- reads: the zone itself ---------------------------------------------------
    def read(self, name: str, rtype: str) -> list[RecordAnswer]:
        return self.reader.read(name, rtype)

    def _staleness(
        self, name: str, rtype: str, want: str, previous_serial: int | None
    ) -> tuple[list[RecordAnswer], dict[str, str]]:
        return self.reader._staleness(name, rtype, want, previous_serial)

    def close(self) -> None:
        self.kube.close()
        self.reader.close()

    # -- the resource -------------------------------------------------------------
    def _resource(self) -> dict[str, Any]:
        found = self.kube.read(self._path, self._params)
        if found is None:
            raise PermanentError(
                self.target, f"{self.resource_name} does not exist at {self.config.site}"
            )
        return found

    @property
    def _endpoints_mode(self) -> bool:
        return self.config.resource.kind == "DNSEndpoint"

    def snapshot(self, name: str, rtype: str) -> dict[str, Any]:
        """The part of the resource a switch changes, as it is now: what an undo restores."""
        obj = self._resource()
        if self._endpoints_mode:
            return {"endpoints": copy.deepcopy((obj.get("spec") or {}).get("endpoints") or [])}
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        keys = (self.config.resource.target_annotation, TTL_ANNOTATION)
        return {"annotations": {key: annotations.get(key) for key in keys}}

    def restore(self, name: str, rtype: str, snapshot: dict[str, Any]) -> None:
        """Put the resource's part back exactly as ``snapshot`` holds it, then wait until
        external-dns has made every server answer the value it gives the record."""
        if "endpoints" in snapshot:
            self.kube.merge_patch(self._path, self._params, {"spec": snapshot})
            values = _endpoint_targets(snapshot["endpoints"], name, rtype)
        else:
            # A merge patch's null removes a key: an annotation that was absent goes again.
            self.kube.merge_patch(self._path, self._params, {"metadata": snapshot})
            target = snapshot["annotations"].get(self.config.resource.target_annotation)
            values = [target] if target else []
        log.info("%s: %s restored", self.target, self.resource_name)
        if len(values) == 1:
            self.confirm(name, rtype, values[0], deadline_s=self.apply_deadline_s)
        elif not values:
            self._wait_absent(name, rtype)

    @property
    def apply_deadline_s(self) -> float:
        """How long external-dns may take to apply a change it was given."""
        return 2 * self.config.sync_interval + APPLY_GRACE_S

    def _wait_absent(self, name: str, rtype: str) -> None:
        deadline = time.monotonic() + self.apply_deadline_s
        while True:
            left = [a.server for a in self.read(name, rtype) if a.exists]
            if not left:
                return
            if time.monotonic() >= deadline:
                raise TemporaryError(
                    self.target, f"{name} {rtype} still answered by {', '.join(left)}"
                )
            time.sleep(self.poll_interval_s)

    # -- changes ------------------------------------------------------------------
    def update(self, name: str, rtype: str, value: str, ttl: int) -> ChangeResult:
        target = _external_value(rtype, value)
        obj = self._resource()
        if self._endpoints_mode:
            endpoints = copy.deepcopy((obj.get("spec") or {}).get("endpoints") or [])
            found = _find_endpoint(endpoints, name, rtype)
            if found is None:
                endpoints.append(
                    {"dnsName": name.rstrip("."), "recordType": rtype, "targets": [target],
                     "recordTTL": ttl}
                )  # fmt: skip
            else:
                found["targets"] = [target]
            body: dict[str, Any] = {"spec": {"endpoints": endpoints}}
        else:
            self._only_own_name(name)
            annotation = self.config.resource.target_annotation
            body = {"metadata": {"annotations": {annotation: target}}}
        self.kube.merge_patch(self._path, self._params, body)
        log.info("%s: %s %s set to %s in %s", self.target, name, rtype, value, self.resource_name)
        return ChangeResult(self.target, name, rtype, value, ttl, sent_to=self.resource_name)

    def delete(self, name: str, rtype: str) -> None:
        if not self._endpoints_mode:
            self._only_own_name(name)
            annotation = self.config.resource.target_annotation
            body: dict[str, Any] = {"metadata": {"annotations": {annotation: None}}}
        else:
            endpoints = (self._resource().get("spec") or {}).get("endpoints") or []
            kept = [e for e in endpoints if not _is_endpoint(e, name, rtype)]
            body = {"spec": {"endpoints": kept}}
        self.kube.merge_patch(self._path, self._params, body)
        log.info("%s: %s %s removed from %s", self.target, name, rtype, self.resource_name)

    def _only_own_name(self, name: str) -> None:
        if normalize_name(name) != normalize_name(self.config.record.name):
            raise PermanentError(
                self.target,
                f"a {self.config.resource.kind}'s annotation switches only its own name "
                f"({self.config.record.name}), not {name}: use a DNSEndpoint for more names",
            )

    def check_control(self, name: str, rtype: str) -> None:
        """The resource can be patched (a server-side dry run of the write a switch makes,
        changing nothing), and external-dns owns the record for the plan's owner id."""
        obj = self._resource()
        if self._endpoints_mode:
            body: dict[str, Any] = {"spec": {"endpoints": (obj.get("spec") or {}).get("endpoints")}}
        else:
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            annotation = self.config.resource.target_annotation
            body = {"metadata": {"annotations": {annotation: annotations.get(annotation)}}}
        self.kube.merge_patch(self._path, self._params, body, dry_run=True)
        self.check_owner(name, rtype)

    def ownership(self, name: str, rtype: str) -> Ownership | None:
        """The registry entry external-dns keeps for the record (new TXT format first), as
        the first authoritative server answers it; None when there is none."""
        server = self.reader.primary
        for txt in txt_names(name, rtype, self.config.txt_prefix):
            for value in self.reader.read_server(server, txt, "TXT").values:
                labels = parse_labels(value)
                if labels is not None:
                    return Ownership(
                        txt, labels.get(OWNER_LABEL, ""), labels.get(RESOURCE_LABEL, "")
                    )
        return None

    def check_owner(self, name: str, rtype: str) -> Ownership:
        """PermanentError, naming both owners (or resources), unless external-dns owns the
        record for the plan's owner id and resource."""
        found = self.ownership(name, rtype)
        want_owner = self.config.owner_id
        want_resource = self.config.resource.registry_resource
        if found is None:
            new, old = txt_names(name, rtype, self.config.txt_prefix)
            raise PermanentError(
                self.target,
                f"external-dns does not own {name} {rtype}: no TXT registry entry at {new} "
                f"or {old} (has it synced {self.resource_name}? is its --txt-prefix "
                f"{self.config.txt_prefix!r}?)",
            )
        if found.owner != want_owner:
            raise PermanentError(
                self.target,
                f"{name} {rtype} is owned by external-dns owner {found.owner!r} (TXT "
                f"{found.txt_name}), not the plan's owner_id {want_owner!r}: two "
                "controllers would fight over the record",
            )
        if found.resource and found.resource != want_resource:
            raise PermanentError(
                self.target,
                f"{name} {rtype} is driven by {found.resource} (TXT {found.txt_name}), not "
                f"the plan's {want_resource}: a switch written there would not take",
            )
        return found


def _is_endpoint(endpoint: Any, name: str, rtype: str) -> bool:
    return (
        isinstance(endpoint, dict)
        and normalize_name(str(endpoint.get("dnsName", ""))) == normalize_name(name)
        and str(endpoint.get("recordType", "")).upper() == rtype.upper()
    )


def _find_endpoint(endpoints: list[Any], name: str, rtype: str) -> dict[str, Any] | None:
    return next((e for e in endpoints if _is_endpoint(e, name, rtype)), None)


def _endpoint_targets(endpoints: list[Any], name: str, rtype: str) -> list[str]:
    found = _find_endpoint(endpoints, name, rtype)
    return [str(t) for t in (found or {}).get("targets") or []]


def external_dns_for(plan: DrillPlan, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> ExternalDnsTarget:
    """The adapter for a plan whose ``dns.provider`` is external-dns."""
    config = plan.dns
    if not isinstance(config, ExternalDnsController):
        raise PermanentError("dns", f"provider {config.provider!r} is not external-dns")
    site = getattr(plan.sites, config.site)
    kube = KubeTarget.for_site(config.site, site, plan)
    return ExternalDnsTarget(config, kube, Rfc2136Target(config, None, timeout_s=timeout_s))
