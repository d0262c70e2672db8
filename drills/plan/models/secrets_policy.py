"""The secrets that must be at DR, and how old they may be."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from drills.plan.models.base import PlanModel, StrictBool, StrictInt
from drills.plan.models.stores import StoreSecret
from drills.plan.rules import key_of, unique_by
from drills.plan.types import AwsSecretId, K8sName, K8sNamespace


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
