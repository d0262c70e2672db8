"""The parts of a drill plan: sites and how to reach them, and how to fence, fail over and
judge them.

Every model is frozen and refuses unknown keys. Rules that relate fields of one
model live in that model, so they run even when another part of the plan is
broken; :class:`drills.plan.loader.DrillPlan` holds the few rules that span sections.
"""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, Tag, model_validator

from drills.plan.durations import Duration, PositiveDuration, format_duration
from drills.plan.model_base import PlanModel, StrictBool, StrictInt
from drills.plan.refs import SecretRef
from drills.plan.rules import Rule, key_of, raise_rules, unique_by
from drills.plan.stores import (
    EXTERNAL_TAG,
    ExternalRegistry,
    ProviderSettings,
    SecretStore,
    StoreSecret,
    provider_tag,
    settings_rules,
)
from drills.plan.types import (
    AwsAccountId,
    AwsRegion,
    AwsSecretId,
    BucketName,
    CheckpointPlace,
    CronExpr,
    DnsName,
    DnsNameOrRef,
    DnsServer,
    FilePath,
    HostedZoneId,
    HttpUrl,
    ImageRef,
    K8sName,
    K8sNamespace,
    Label,
    NameOrRef,
    ObjectPrefix,
    ProviderName,
    ShortText,
    Text,
    TimeZone,
    check_fqdn,
)
from drills.plan.urls import service_key

# Fencing, bringing DR up, switching DNS and one smoke probe take longer than this
# even on a warm DR pool; an RTO below it is a typo (1ms, 10s for 10m) that fails every drill.
MIN_RTO_SECONDS = 30.0


class Tier(StrEnum):
    CRITICAL = "critical"
    NORMAL = "normal"
    BATCH = "batch"


class WorkloadKind(StrEnum):
    DEPLOYMENT = "Deployment"
    STATEFULSET = "StatefulSet"


class DatasetKind(StrEnum):
    DATA = "data"
    CHECKPOINT = "checkpoint"
    MODEL = "model"


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


# --- sites ------------------------------------------------------------------------


class KubernetesAccess(PlanModel):
    """Either a kubeconfig file (and optionally a context in it) or the in-cluster account."""

    kubeconfig: FilePath | None = None
    """A kubeconfig file, relative to the plan's directory."""
    context: ShortText | None = None
    """The context of the kubeconfig to use; default its current context."""
    in_cluster: StrictBool = False
    """Use the service account of the pod drills runs in, instead of a kubeconfig."""

    @model_validator(mode="after")
    def _one_way_in(self) -> KubernetesAccess:
        rules: list[Rule] = []
        if self.in_cluster and self.kubeconfig is not None:
            rules.append((("in_cluster",), "give either kubeconfig or in_cluster: true, not both"))
        elif self.in_cluster and self.context is not None:
            rules.append((("context",), "context applies only with a kubeconfig"))
        elif not self.in_cluster and self.kubeconfig is None:
            rules.append(
                ((), "needs kubeconfig: PATH (and optionally context), or in_cluster: true")
            )
        raise_rules("kubernetes", rules)
        return self


class AwsCredentials(PlanModel):
    access_key_id: SecretRef
    secret_access_key: SecretRef
    session_token: SecretRef | None = None
    """A reference to a session token, for temporary credentials."""


class AwsAccess(PlanModel):
    region: AwsRegion
    """The AWS region of the site's Secrets Manager and ECR."""
    endpoint_url: HttpUrl | None = None
    """Another endpoint than AWS's (an S3-compatible store, a test server)."""
    credentials: AwsCredentials | None = None
    """Credential references; without them, the default AWS credential chain."""


class OciAuth(PlanModel):
    """Registry credentials: ``username`` and ``password``, or a bearer ``token``.

    ``username`` is a literal or a reference (``env:HARBOR_USER``), like ``password``."""

    username: NameOrRef | None = None
    """The registry user: a literal, or a reference (env:, file:, prefect:)."""
    password: SecretRef | None = None
    """A reference to the registry password."""
    token: SecretRef | None = None
    """A reference to a bearer token, instead of username and password."""

    @model_validator(mode="after")
    def _one_scheme(self) -> OciAuth:
        rules: list[Rule] = []
        basic = self.username is not None or self.password is not None
        if self.token is not None and basic:
            rules.append((("token",), "give either username and password, or token, not both"))
        elif self.token is None and not basic:
            rules.append(((), "give username and password, or token"))
        elif self.token is None:
            for name in ("username", "password"):
                if getattr(self, name) is None:
                    rules.append(((name,), f"missing required field `{name}`"))
        raise_rules("auth", rules)
        return self


class OciRegistry(PlanModel):
    kind: Literal["oci"]
    """An OCI distribution registry (Harbor, Docker registry, GHCR...)."""
    url: HttpUrl
    """The registry's base URL."""
    auth: OciAuth | None = None
    """Credentials; without them, anonymous pulls."""

    @property
    def provider_name(self) -> str:
        return self.kind


class EcrRegistry(PlanModel):
    kind: Literal["ecr"]
    """Amazon ECR."""
    region: AwsRegion | None = Field(None, description="Defaults to the site's aws.region.")
    registry_id: AwsAccountId
    """The AWS account id of the registry."""

    @property
    def provider_name(self) -> str:
        return self.kind


Registry = Annotated[
    Annotated[OciRegistry, Tag("oci")]
    | Annotated[EcrRegistry, Tag("ecr")]
    | Annotated[ExternalRegistry, Tag(EXTERNAL_TAG)],
    provider_tag("kind", ("oci", "ecr")),
]


class ObjectStorage(PlanModel):
    """S3-compatible object storage; without ``endpoint_url``, AWS S3 itself. Another
    installed provider (``provider``) reads its own ``settings`` instead."""

    provider: ProviderName = "s3"
    """The object-store provider (`drills providers list`): s3, or an installed one."""
    settings: ProviderSettings = {}  # noqa: RUF012 - pydantic copies a default per model
    """What a provider other than s3 reads, as its documentation says."""
    endpoint_url: HttpUrl | None = None
    """An S3-compatible endpoint; without it, AWS S3."""
    region: AwsRegion | None = None
    """The buckets' region; default the site's aws.region, else us-east-1."""
    credentials: AwsCredentials | None = None
    """Credential references; without them, the default AWS credential chain."""

    @model_validator(mode="after")
    def _provider_fields(self) -> ObjectStorage:
        rules = settings_rules(self.provider, "s3", self.settings)
        if self.provider != "s3":
            rules += [
                ((name,), f"is the s3 provider's; give {self.provider}'s in settings")
                for name in ("endpoint_url", "region", "credentials")
                if getattr(self, name) is not None
            ]
        raise_rules("objects", rules)
        return self


class ObjectRef(PlanModel):
    namespace: K8sNamespace
    """The object's namespace."""
    name: K8sName
    """The object's name."""

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class IngressFence(PlanModel):
    """Fence the site by closing these Ingress objects."""

    mode: Literal["ingress"]
    """Fence by closing Ingress objects (switched to a class no controller serves)."""
    objects: Annotated[
        tuple[ObjectRef, ...],
        Field(min_length=1),
        unique_by("ingress", key_of("namespace", "name"), "name", "objects"),
    ]
    """The Ingress objects to close."""


class ControllerFence(PlanModel):
    """Fence the site by scaling its ingress-controller Deployment to zero."""

    mode: Literal["controller"]
    """Fence by scaling the ingress controller to zero."""
    deployment: ObjectRef
    """The ingress controller's Deployment."""


Fence = Annotated[IngressFence | ControllerFence, Field(discriminator="mode")]


class Site(PlanModel):
    kubernetes: KubernetesAccess
    """How to reach the site's cluster."""
    aws: AwsAccess | None = None
    """The site's AWS account, for Secrets Manager and ECR."""
    registry: Registry
    """The container registry the site pulls from."""
    objects: ObjectStorage
    """The site's object storage, holding the datasets' buckets."""
    object_stores: Annotated[dict[Label, ObjectStorage], Field(max_length=20)] = {}  # noqa: RUF012 - pydantic copies a default per model
    """More object stores at this site, by name, for datasets that name one (`store`):
    a dataset on Azure Blob Storage beside others on S3, say."""
    secret_store: SecretStore = SecretStore()
    """The site's secret store, for `secrets.store`; default AWS Secrets Manager."""
    ingress: Fence
    """How the site is fenced: its Ingress objects closed, or its controller stopped."""
    endpoint: HttpUrl = Field(description="The site's own service endpoint, probed directly.")

    @model_validator(mode="after")
    def _ecr_has_region(self) -> Site:
        if isinstance(self.registry, EcrRegistry) and self.registry_region is None:
            message = "an ecr registry needs region here, or an aws section with region on the site"
            raise_rules("site", [(("registry", "region"), message)])
        return self

    @property
    def registry_region(self) -> str | None:
        """The ECR region: the registry's own, else the site's AWS region."""
        if not isinstance(self.registry, EcrRegistry):
            return None
        return self.registry.region or (self.aws.region if self.aws else None)

    def objects_for(self, store: str | None) -> ObjectStorage:
        """The object store a dataset names (``Dataset.store``), or ``objects`` for None."""
        return self.objects if store is None else self.object_stores[store]

    @property
    def objects_region(self) -> str:
        if self.objects.region:
            return self.objects.region
        return self.aws.region if self.aws else "us-east-1"


class Sites(PlanModel):
    primary: Site
    """The site that serves now."""
    dr: Site
    """The site that takes over."""

    @model_validator(mode="after")
    def _distinct(self) -> Sites:
        rules: list[Rule] = []
        if service_key(self.primary.endpoint) == service_key(self.dr.endpoint):
            rules.append(
                (
                    ("dr", "endpoint"),
                    "must be another service than the primary endpoint (same scheme, host "
                    "and port here), or the fence check cannot tell the sites apart",
                )
            )
        p, d = self.primary.kubernetes, self.dr.kubernetes
        if p.kubeconfig == d.kubeconfig and p.context == d.context and p.in_cluster == d.in_cluster:
            rules.append((("dr", "kubernetes"), "points at the same cluster as the primary site"))
        raise_rules("sites", rules)
        return self

    def items(self) -> tuple[tuple[str, Site], tuple[str, Site]]:
        """``(("primary", site), ("dr", site))``, for loops over both sites."""
        return ("primary", self.primary), ("dr", self.dr)


# --- what fails over ---------------------------------------------------------------


class Workload(PlanModel):
    name: K8sName
    """The workload's name."""
    namespace: K8sNamespace
    """Its namespace (the same at both sites)."""
    kind: WorkloadKind
    """Deployment or StatefulSet."""
    tier: Tier
    """critical: needed to serve (up before the RTO); normal: up after it; batch: paused."""
    dr_replicas: Annotated[StrictInt, Field(ge=0, le=10_000)]
    """Replicas at DR during a takeover; at least 1 for a critical workload."""
    writer: StrictBool = Field(False, description="Stopped at the primary before DR comes up.")
    gpu: Annotated[StrictInt, Field(ge=0, le=64, description="nvidia.com/gpu per replica.")] = 0
    images: tuple[ImageRef, ...] = Field((), description="Empty: read from the cluster.")

    @model_validator(mode="after")
    def _critical_has_replicas(self) -> Workload:
        if self.tier is Tier.CRITICAL and self.dr_replicas == 0:
            message = (
                "a critical workload needs at least 1 DR replica: a drill would fence the "
                "primary and switch DNS with nothing behind it (use tier normal or batch "
                "for a workload that may stay down)"
            )
            raise_rules("workload", [(("dr_replicas",), message)])
        return self

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def dr_gpus(self) -> int:
        return self.gpu * self.dr_replicas


class InventorySchedule(StrEnum):
    """How often S3 publishes the report (the configuration's ``Schedule.Frequency``)."""

    DAILY = "Daily"
    WEEKLY = "Weekly"

    @property
    def seconds(self) -> float:
        return 86_400.0 if self is InventorySchedule.DAILY else 7 * 86_400.0


# S3 allows letters, digits and - . _ in an inventory configuration's id, up to 64.
InventoryId = Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")]
# The strftime directives a daily partition may name: a year, a month and a day, nothing finer.
_RECENT_DIRECTIVES = {"%Y", "%m", "%d"}


class InventoryDestination(PlanModel):
    """Where one side's inventory reports land: the destination bucket and prefix."""

    bucket: BucketName
    """The bucket S3 writes this side's inventory reports to."""
    prefix: ObjectPrefix = ""
    """The reports' prefix in that bucket."""
    config_id: InventoryId | None = None  # when this side's configuration has its own id
    """This side's inventory configuration id, when it differs from the dataset's."""


class DatasetInventory(PlanModel):
    """S3 Inventory reports of both buckets, read instead of listing every object.

    Reports land at ``PREFIX/SOURCE-BUCKET/CONFIG-ID/YYYY-MM-DDTHH-MMZ/manifest.json``.
    ``recent_layout`` names the dataset's date partitions under its prefix as a strftime
    pattern (``"%Y/%m/%d/"``, ``"dt=%Y-%m-%d/"``): the days since the older report are
    then listed as well, so objects newer than the reports are checked too.
    """

    config_id: InventoryId
    """The S3 Inventory configuration's id."""
    schedule: InventorySchedule = InventorySchedule.DAILY
    """How often S3 publishes the report."""
    primary: InventoryDestination
    """Where the primary bucket's reports are."""
    dr: InventoryDestination
    """Where the DR bucket's reports are."""
    recent_layout: ShortText | None = None
    """How recent objects, newer than the reports, are named, to list them directly."""

    def config_for(self, side: InventoryDestination) -> str:
        return side.config_id or self.config_id

    @model_validator(mode="after")
    def _recent_is_daily(self) -> DatasetInventory:
        layout = self.recent_layout
        if layout is None:
            return self
        used = set(re.findall(r"%.", layout))
        rules: list[Rule] = []
        if not {"%Y", "%m", "%d"} <= used or used - _RECENT_DIRECTIVES:
            rules.append(
                (
                    ("recent_layout",),
                    'needs %Y, %m and %d and no other % directive, e.g. "%Y/%m/%d/" or '
                    '"dt=%Y-%m-%d/" (one partition per day)',
                )
            )
        elif not layout.endswith("/"):
            rules.append((("recent_layout",), "must end with / (a partition is a directory)"))
        raise_rules("DatasetInventory", rules)
        return self


class Dataset(PlanModel):
    name: Label
    """The dataset's name, in reports and metrics."""
    kind: DatasetKind
    """data, checkpoint or model: checkpoints are also checked for freshness."""
    primary_bucket: BucketName
    """The bucket at the primary."""
    dr_bucket: BucketName
    """Its replica at DR."""
    prefix: ObjectPrefix = ""
    """Only objects under this prefix."""
    rpo_target: PositiveDuration
    min_versions: Annotated[StrictInt, Field(ge=1, le=1000)] = 3
    """Non-current versions the DR bucket's lifecycle must keep."""
    inventory: DatasetInventory | None = None
    """For buckets too big to list: compare their S3 Inventory reports instead."""
    store: Label | None = None
    """The object store holding both copies: a name of `sites.*.object_stores`, at each
    site; without it, the sites' `objects`."""


class KubernetesSecret(PlanModel):
    namespace: K8sNamespace
    """The Secret's namespace."""
    name: K8sName
    """The Secret's name."""
    per_site: StrictBool = Field(False, description="Must differ between sites (pull secrets).")


class AwsSecret(PlanModel):
    id: AwsSecretId
    """The Secrets Manager secret's name or ARN."""
    per_site: StrictBool = False
    """Must differ between sites."""


class ExternalSecretRef(PlanModel):
    """An ExternalSecret (external-secrets.io) at each site, by namespace and name."""

    namespace: K8sNamespace
    """The ExternalSecret's namespace (the same at both sites)."""
    name: K8sName
    """The ExternalSecret's name (the same at both sites)."""


class SecretsPolicy(PlanModel):
    max_age_days: Annotated[StrictInt, Field(ge=1, le=3650)] = 90
    """The longest a secret may go without rotation or change."""
    kubernetes: Annotated[
        tuple[KubernetesSecret, ...],
        unique_by("secret", key_of("namespace", "name"), "name", "secrets.kubernetes"),
    ] = ()
    """Kubernetes Secrets that must be at DR."""
    aws: Annotated[
        tuple[AwsSecret, ...], unique_by("secret", key_of("id"), "id", "secrets.aws")
    ] = ()
    """Secrets Manager secrets that must be at DR."""
    store: Annotated[
        tuple[StoreSecret, ...], unique_by("secret", key_of("id"), "id", "secrets.store")
    ] = ()
    """Secrets of each site's secret store (sites.*.secret_store) that must be at DR."""
    external_secrets: Annotated[
        tuple[ExternalSecretRef, ...],
        unique_by(
            "ExternalSecret", key_of("namespace", "name"), "name", "secrets.external_secrets"
        ),
    ] = ()
    """ExternalSecrets (External Secrets Operator) whose sync at DR must be Ready and fresh,
    and whose target Secret must match the primary's."""


# --- DNS ---------------------------------------------------------------------------


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


# --- judging the drill -------------------------------------------------------------


class Objectives(PlanModel):
    rto: PositiveDuration
    rpo: PositiveDuration

    @model_validator(mode="after")
    def _feasible(self) -> Objectives:
        if self.rto < MIN_RTO_SECONDS:
            message = (
                f"an RTO of {format_duration(self.rto)} is below any feasible takeover: "
                "fencing, bringing DR up, switching DNS and a smoke probe take at least "
                f"{format_duration(MIN_RTO_SECONDS)}"
            )
            raise_rules("objectives", [(("rto",), message)])
        return self


class SmokeProbe(PlanModel):
    name: ShortText
    """The probe's name, in reports."""
    url: HttpUrl
    """The URL to request, through the plan's DNS name."""
    expect_status: Annotated[StrictInt, Field(ge=100, le=599)] = 200
    """The HTTP status the probe must get."""
    expect_body: Text | None = Field(None, description="A substring the body must contain.")
    timeout: PositiveDuration = 30.0


class Schedule(PlanModel):
    cron: CronExpr
    """A cron expression: at most hourly; weekly to quarterly is usual."""
    timezone: TimeZone = "UTC"
    """The IANA time zone the cron expression is read in."""


class Approval(PlanModel):
    required: StrictBool = False
    """A person must approve before the primary is fenced."""
    timeout: PositiveDuration = 3600.0


class Sentinel(PlanModel):
    """A small real workload kept running at DR, so the DR chain is exercised every day."""

    namespace: K8sNamespace
    """The sentinel's namespace at DR."""
    name: K8sName
    """The sentinel workload's name."""
    kind: WorkloadKind = WorkloadKind.DEPLOYMENT
    """Deployment or StatefulSet."""
    max_age: PositiveDuration = Field(
        3600.0, description="How old the sentinel's last success may be."
    )
    success_annotation: ShortText = Field(
        "drills.dev/last-success",
        description="The annotation where the sentinel writes the time of its last success.",
    )

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class EvidenceSettings(PlanModel):
    """Where the evidence chain's checkpoints are kept outside the history store."""

    checkpoints: CheckpointPlace | None = Field(
        None,
        description="A directory, or s3://bucket/prefix (Object Lock used where the bucket "
        "has it): `drills evidence checkpoint` and the readiness deployment write there.",
    )


class Practice(PlanModel):
    """How `drills run --mode practice` sees DR serve without touching production."""

    record: DnsName | None = Field(
        None,
        description="A name of its own (never one production serves from) that a practice "
        "points at DR's value and removes afterwards, restoring what it held. Without it, "
        "a practice probes DR's endpoint directly.",
    )
