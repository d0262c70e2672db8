"""What a provider's ``build`` is given: who asks, the plan, the site and its settings.

Its own module, so that a provider's adapter may read it without importing the
Protocols of :mod:`drills.targets.provider_api`, which name the adapters' own types;
``provider_api`` gives it too, where a provider package imports it from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from drills.plan import DrillPlan, Site


@dataclass(frozen=True)
class ProviderContext:
    """What ``build`` gets: who asks, the plan, the site (None for DNS) and the settings
    the plan gives this provider (``settings:``, for a provider that is not built in)."""

    role: str
    plan: DrillPlan
    site: Site | None
    settings: Mapping[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None
    """A tighter timeout for each call, when the caller asks for one; else the provider's."""

    def secret(self, reference: str) -> str:
        """A credential the settings give by reference (``env:NAME``, ``file:PATH``,
        ``prefect:BLOCK``), resolved now; the plan never holds one inline."""
        from drills.plan.refs import SecretRef

        return self.plan.resolve_secret(SecretRef.parse(reference))

    def path(self, relative: str) -> str:
        """A file the settings name, relative to the plan's directory."""
        return str(self.plan.resolve_path(relative))
