"""The DNS record a takeover switches from the primary to DR, and the provider that
switches it: RFC 2136 with TSIG, Route 53, external-dns, or an installed one."""

from __future__ import annotations

import ipaddress
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, Tag, model_validator

from drills.plan.durations import Duration, PositiveDuration
from drills.plan.models.base import PlanModel
from drills.plan.models.sites import AwsAccess
from drills.plan.models.stores import EXTERNAL_TAG, ProviderSettings, provider_tag
from drills.plan.refs import SecretRef
from drills.plan.rules import Rule, raise_rules
from drills.plan.types import (
    DnsName,
    DnsNameOrRef,
    DnsServer,
    HostedZoneId,
    K8sName,
    K8sNamespace,
    ProviderName,
    ShortText,
    check_fqdn,
)


class RecordType(StrEnum):
    A = "A"
    AAAA = "AAAA"
    CNAME = "CNAME"


class TsigAlgorithm(StrEnum):
    HMAC_SHA256 = "hmac-sha256"
    HMAC_SHA384 = "hmac-sha384"
    HMAC_SHA512 = "hmac-sha512"
    HMAC_SHA1 = "hmac-sha1"
    HMAC_MD5 = "hmac-md5"


class DnsRecord(PlanModel):
    name: DnsName
    """The record's fully qualified name."""
    type: RecordType
    """A, AAAA or CNAME."""


class TsigKey(PlanModel):
    """The key's ``name`` is a DNS name or a reference to one; ``secret`` a reference."""

    name: DnsNameOrRef
    """The TSIG key's name: a DNS name, or a reference to one."""
    algorithm: TsigAlgorithm = TsigAlgorithm.HMAC_SHA256
    """The TSIG algorithm."""
    secret: SecretRef


def _record_value(kind: RecordType, value: str) -> object:
    """The comparable form of ``value`` for a record of ``kind``; ValueError when invalid."""
    if kind is RecordType.A:
        return ipaddress.IPv4Address(value)
    if kind is RecordType.AAAA:
        return ipaddress.IPv6Address(value)
    return check_fqdn(value)


_VALUE_HINT = {
    RecordType.A: "an IPv4 address for an A record",
    RecordType.AAAA: "an IPv6 address for an AAAA record",
    RecordType.CNAME: "a DNS name for a CNAME record",
}


class DnsSwitch(PlanModel):
    """What both DNS providers share: the record, its two values and the TTL ceiling."""

    provider: str
    record: DnsRecord
    """The record to switch."""
    primary_value: ShortText
    """Its value while the primary serves."""
    dr_value: ShortText
    """Its value while DR serves."""
    max_ttl: Duration = Field(60.0, description="Longest TTL the record may have.")

    @model_validator(mode="after")
    def _values(self) -> DnsSwitch:
        rules: list[Rule] = []
        parsed: dict[str, object] = {}
        for field in ("primary_value", "dr_value"):
            try:
                parsed[field] = _record_value(self.record.type, getattr(self, field))
            except ValueError:
                rules.append(((field,), f"must be {_VALUE_HINT[self.record.type]}"))
        if len(parsed) == 2 and parsed["primary_value"] == parsed["dr_value"]:
            rules.append(
                (("dr_value",), "must differ from primary_value, or the switch is a no-op")
            )
        if self.record.type is RecordType.CNAME:
            rules += [
                ((field,), "a CNAME cannot point at its own name: resolvers would loop")
                for field, value in parsed.items()
                if value == self.record.name
            ]
        rules.extend(self._zone_rules())
        raise_rules("dns", rules)
        return self

    def _zone_rules(self) -> list[Rule]:
        return []


class Rfc2136Dns(DnsSwitch):
    """Dynamic updates (RFC 2136), signed with TSIG, sent to every listed server."""

    provider: Literal["rfc2136"]
    """Dynamic DNS updates (RFC 2136), signed with TSIG."""
    servers: Annotated[tuple[DnsServer, ...], Field(min_length=1)]
    """The authoritative servers (host:port), each updated and confirmed."""
    zone: DnsName
    """The zone that holds the record."""
    tsig: TsigKey
    """The key that signs the updates."""

    def _zone_rules(self) -> list[Rule]:
        name, zone = self.record.name, self.zone
        if name == zone or name.endswith("." + zone):
            return []
        return [(("record", "name"), f"{name} is not inside the zone {zone}")]


class Route53Dns(DnsSwitch):
    provider: Literal["route53"]
    """Amazon Route 53."""
    hosted_zone_id: HostedZoneId
    """The hosted zone that holds the record."""
    aws: AwsAccess
    """The AWS account of the hosted zone."""


class ExternalDns(DnsSwitch):
    """A DNS provider that is installed but not built in; it reads its own ``settings``."""

    provider: ProviderName
    """The provider's name (`drills providers list`)."""
    settings: ProviderSettings = {}  # noqa: RUF012 - pydantic copies a default per model
    """What that provider reads, as its documentation says."""


EXTERNAL_DNS_TARGET = "external-dns.alpha.kubernetes.io/target"


class ExternalDnsResource(PlanModel):
    """The resource external-dns reads the record from: a ``DNSEndpoint``
    (externaldns.k8s.io/v1alpha1, its crd source), or a Service or Ingress whose annotation
    holds the record's target."""

    kind: Literal["DNSEndpoint", "Service", "Ingress"] = "DNSEndpoint"
    """DNSEndpoint, Service or Ingress."""
    namespace: K8sNamespace
    """The resource's namespace."""
    name: K8sName
    """The resource's name."""
    annotation: ShortText | None = Field(
        None,
        description="The annotation holding the target, on a Service or Ingress; default "
        f"{EXTERNAL_DNS_TARGET}.",
    )

    @model_validator(mode="after")
    def _annotation(self) -> ExternalDnsResource:
        if self.kind == "DNSEndpoint" and self.annotation is not None:
            raise_rules(
                "resource",
                [(("annotation",), "is for a Service or Ingress; a DNSEndpoint holds targets")],
            )
        return self

    @property
    def target_annotation(self) -> str:
        return self.annotation or EXTERNAL_DNS_TARGET

    @property
    def registry_resource(self) -> str:
        """How external-dns's TXT registry names the resource: ``crd/ns/name``."""
        source = "crd" if self.kind == "DNSEndpoint" else self.kind.lower()
        return f"{source}/{self.namespace}/{self.name}"


class ExternalDnsController(DnsSwitch):
    """external-dns switches the record: drills writes the resource it reads, in the cluster
    where it runs, and confirms the answer on the zone's authoritative servers."""

    provider: Literal["external-dns"]
    """external-dns (kubernetes-sigs), through its crd source or an annotation."""
    site: Literal["primary", "dr"]
    """The site whose kubeconfig reaches the cluster where external-dns runs."""
    resource: ExternalDnsResource
    """The DNSEndpoint (or annotated Service/Ingress) holding the record."""
    owner_id: ShortText
    """external-dns's --txt-owner-id: its TXT registry entry must name this owner."""
    txt_prefix: str = Field("", max_length=63, description="external-dns's --txt-prefix.")
    servers: Annotated[tuple[DnsServer, ...], Field(min_length=1)]
    """The zone's authoritative servers (host:port), each confirmed."""
    zone: DnsName
    """The zone that holds the record."""
    sync_interval: PositiveDuration = Field(
        60.0, description="external-dns's --interval: how long it may take to apply a change."
    )

    def _zone_rules(self) -> list[Rule]:
        name, zone = self.record.name, self.zone
        if name == zone or name.endswith("." + zone):
            return []
        return [(("record", "name"), f"{name} is not inside the zone {zone}")]


Dns = Annotated[
    Annotated[Rfc2136Dns, Tag("rfc2136")]
    | Annotated[Route53Dns, Tag("route53")]
    | Annotated[ExternalDnsController, Tag("external-dns")]
    | Annotated[ExternalDns, Tag(EXTERNAL_TAG)],
    provider_tag("provider", ("rfc2136", "route53", "external-dns")),
]
