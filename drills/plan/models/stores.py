"""The plan's words for providers: the settings a provider gets, the section of a registry
served by one that is not built in, each site's secret store and the secrets read from it.

A provider is selected by name (an entry point of the ``drills.providers`` group); the plan
only checks that the name is well formed. Whether it is installed is checked where the plan
is used (`drills plan validate`, readiness, a run), in one line naming those installed.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Discriminator, Field, JsonValue, model_validator

from drills.plan.models.base import PlanModel, StrictBool
from drills.plan.rules import Rule, raise_rules
from drills.plan.types import ProviderName, ShortText

# What a provider that is not built in gets from the plan, as written (credentials in it only
# as references: the loader refuses a literal one anywhere in a plan).
ProviderSettings = Annotated[dict[str, JsonValue], Field(max_length=100)]
# The union tag pydantic adds to an error's location for a provider that is not built in
# (``dns.external.record``); drills.plan.error_translation drops it as it drops ``oci`` or
# ``rfc2136``.
EXTERNAL_TAG = "external"


def provider_tag(discriminator: str, built_in: tuple[str, ...]) -> Any:
    """The union tag of a section: its ``discriminator`` when built in, EXTERNAL_TAG for a
    ``provider`` that is not, None (missing) when it names neither."""

    def tag(data: Any) -> str | None:
        get = data.get if isinstance(data, dict) else lambda key: getattr(data, key, None)
        named = get(discriminator)
        if named in built_in:
            return str(named)
        if discriminator != "provider" and named is not None:
            return str(named)  # an unknown kind: refused, naming the kinds there are
        if named is not None or get("provider") is not None:
            return EXTERNAL_TAG
        return None

    tag.__name__ = discriminator  # pydantic's errors name the discriminator `kind()`
    return Discriminator(tag)


def settings_rules(provider: str, built_in: str, settings: dict[str, Any]) -> list[Rule]:
    if provider == built_in and settings:
        return [(("settings",), f"the built-in {built_in} provider takes no settings")]
    return []


class ExternalRegistry(PlanModel):
    """A registry served by an installed provider that is not built in."""

    provider: ProviderName
    """The provider's name (`drills providers list`)."""
    settings: ProviderSettings = {}  # noqa: RUF012 - pydantic copies a default per model
    """What that provider reads, as its documentation says."""

    @property
    def provider_name(self) -> str:
        return self.provider


class SecretStore(PlanModel):
    """Where the plan's ``secrets.store`` entries are read at a site."""

    provider: ProviderName = "aws-secrets-manager"
    """The secret-store provider (`drills providers list`): aws-secrets-manager (through
    the site's aws section), or an installed one."""
    settings: ProviderSettings = {}  # noqa: RUF012 - pydantic copies a default per model
    """What a provider other than aws-secrets-manager reads, as its documentation says."""

    @model_validator(mode="after")
    def _provider_fields(self) -> SecretStore:
        raise_rules(
            "secret_store", settings_rules(self.provider, "aws-secrets-manager", self.settings)
        )
        return self


class StoreSecret(PlanModel):
    id: ShortText
    """The secret's id in each site's secret store (sites.*.secret_store)."""
    per_site: StrictBool = False
    """Must differ between sites."""


def dataset_store_rules(datasets: Any, primary: Any, dr: Any) -> list[Rule]:
    """A dataset's ``store`` must be a store of both sites' ``object_stores``, and S3
    Inventory (``inventory:``) is read from S3 only."""
    rules: list[Rule] = []
    for i, ds in enumerate(datasets):
        if ds.store is None:
            continue
        lacking = [
            role for role, site in (("primary", primary), ("dr", dr))
            if ds.store not in site.object_stores
        ]  # fmt: skip
        if lacking:
            rules.append(
                (("datasets", i, "store"), f"no object store {ds.store!r} in "
                 + " or ".join(f"sites.{role}.object_stores" for role in lacking))
            )  # fmt: skip
    return rules
