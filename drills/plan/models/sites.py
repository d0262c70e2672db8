"""Sites and how to reach them: each site's cluster, AWS account, registry, object storage
and how it is fenced.

Rules that relate fields of one model live in that model, so they run even when another
part of the plan is broken; :class:`drills.plan.models.drill_plan.DrillPlan` holds the few
rules that span sections.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, Tag, model_validator

from drills.plan.models.base import PlanModel, StrictBool
from drills.plan.models.stores import (
    EXTERNAL_TAG,
    ExternalRegistry,
    ProviderSettings,
    SecretStore,
    provider_tag,
    settings_rules,
)
from drills.plan.refs import SecretRef
from drills.plan.rules import Rule, key_of, raise_rules, unique_by
from drills.plan.types import (
    AwsAccountId,
    AwsRegion,
    FilePath,
    HttpUrl,
    K8sName,
    K8sNamespace,
    Label,
    NameOrRef,
    ProviderName,
    ShortText,
)
from drills.plan.urls import service_key


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
