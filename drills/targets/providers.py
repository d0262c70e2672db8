"""The installed providers: every entry point of the ``drills.providers`` group, by name.

drills's own providers (``s3``, ``azure-blob``, ``oci``, ``ecr``, ``aws-secrets-manager``,
``rfc2136``, ``route53``, ``external-dns``) are registered in its pyproject.toml exactly as a
third-party package registers one, so there is one way in. A provider that fails to load (an
import error, an object that is not a :class:`~drills.targets.provider_api.Provider`) stays
listed with its error; a plan that names it, or a name nothing installed has, is refused with
one line that names what is installed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, distributions
from typing import TYPE_CHECKING, Any

from drills.errors import PermanentError
from drills.targets.provider_api import (
    GROUP,
    KINDS,
    Kind,
    Provider,
    ProviderContext,
    missing_methods,
)

if TYPE_CHECKING:
    from drills.plan import DrillPlan, Site


@dataclass(frozen=True)
class Installed:
    """One entry point of the group: its provider, or why it could not be loaded."""

    name: str
    package: str
    version: str
    value: str  # module:attribute, as the package declares it
    provider: Provider | None = None
    error: str | None = None

    @property
    def kind(self) -> str:
        return self.provider.kind if self.provider else "?"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "kind": self.provider.kind if self.provider else None,
            "package": self.package,
            "version": self.version,
            "entry_point": self.value,
        }
        if self.provider is not None:
            p = self.provider
            out |= {"summary": p.summary, "supports": p.supports(), "checks": list(p.checks)}
        else:
            out["error"] = self.error
        return out


class ProviderUnusableError(PermanentError):
    """A plan names a provider that is not installed, or that failed to load."""


_lock = threading.Lock()
_cache: list[Installed] | None = None

# drills's own entry points, as pyproject.toml declares them (a test keeps the two equal).
# Read from there; this table stands in only for a copy of drills whose metadata lacks them:
# run from a source tree, or installed before it had providers and not reinstalled since.
BUILT_IN = {
    "s3": "drills.targets.builtin_providers:S3",
    "oci": "drills.targets.builtin_providers:OCI",
    "ecr": "drills.targets.builtin_providers:ECR",
    "aws-secrets-manager": "drills.targets.builtin_providers:AWS_SECRETS_MANAGER",
    "rfc2136": "drills.targets.builtin_providers:RFC2136",
    "route53": "drills.targets.builtin_providers:ROUTE53",
    "external-dns": "drills.targets.builtin_providers:EXTERNAL_DNS",
    "azure-blob": "drills.targets.builtin_providers:AZURE_BLOB",
}


def _load(point: EntryPoint) -> Installed:
    from drills import __version__

    dist = point.dist
    package = dist.metadata["Name"] if dist is not None else "drills"  # BUILT_IN's
    version = dist.version if dist is not None else __version__
    base = Installed(point.name, package, version, point.value)
    try:
        loaded = point.load()
    except Exception as exc:  # noqa: BLE001 - any failure to import is shown, not raised
        return _broken(base, f"cannot be imported: {type(exc).__name__}: {exc}")
    if not isinstance(loaded, Provider):
        shown = type(loaded).__name__
        return _broken(base, f"{point.value} is a {shown}, not a drills Provider")
    if loaded.kind not in KINDS:
        return _broken(base, f"unknown kind {loaded.kind!r}; kinds are {', '.join(KINDS)}")
    return Installed(base.name, package, version, point.value, provider=loaded)


def _broken(base: Installed, error: str) -> Installed:
    return Installed(base.name, base.package, base.version, base.value, error=error)


def _entry_points() -> list[EntryPoint]:
    """The group's entry points of every distribution on the path. Not
    ``entry_points(group=...)``: it keeps only the first metadata of each distribution, and
    a stale ``*.egg-info`` of a source checkout would hide the installed one's."""
    seen: set[tuple[str, str]] = set()
    points: list[EntryPoint] = []
    for dist in distributions():
        for point in dist.entry_points.select(group=GROUP):
            key = (dist.metadata["Name"] or "", point.name)
            if key not in seen:
                seen.add(key)
                points.append(point)
    points += [
        EntryPoint(name, value, GROUP)
        for name, value in BUILT_IN.items()
        if ("drills", name) not in seen
    ]
    return points


def installed(*, refresh: bool = False) -> list[Installed]:
    """Every provider of the group, loaded once per process, sorted by kind then name."""
    global _cache
    with _lock:
        if _cache is None or refresh:
            found = [_load(point) for point in _entry_points()]
            _cache = sorted(found, key=lambda i: (i.kind, i.name))
        return list(_cache)


def names(kind: Kind) -> list[str]:
    """The names of the usable providers of ``kind``."""
    return [i.name for i in installed() if i.provider is not None and i.provider.kind == kind]


def find(kind: Kind, name: str) -> Provider:
    """The installed provider ``name`` of ``kind``; ProviderUnusableError, in one line, if none."""
    matches = [i for i in installed() if i.name == name]
    usable = [i.provider for i in matches if i.provider is not None and i.provider.kind == kind]
    if usable:
        return usable[0]
    available = ", ".join(names(kind)) or "none"
    broken = [i for i in matches if i.provider is None]
    if broken:
        why = f"failed to load ({broken[0].error})"
    elif matches:
        why = f"is a provider of {matches[0].kind}, not of {kind}"
    else:
        why = "is not installed"
    raise ProviderUnusableError(
        f"{kind} provider {name!r}", f"{why}; installed {kind} providers: {available}"
    )


def build(kind: Kind, name: str, where: ProviderContext) -> Any:
    """The adapter the provider ``name`` builds, checked against its kind's Protocol."""
    adapter = find(kind, name).build(where)
    lacking = missing_methods(kind, adapter)
    if lacking:
        raise ProviderUnusableError(
            f"{kind} provider {name!r}",
            f"built a {type(adapter).__name__} without {', '.join(lacking)}",
        )
    return adapter


def site_adapter(kind: Kind, label: str, site: Site, plan: DrillPlan) -> Any:
    """The adapter of a site's store of ``kind``, from the provider its section names."""
    name, settings = site_provider(site, kind)
    return build(kind, name, ProviderContext(label, plan, site, settings))


def site_provider(site: Site, kind: Kind) -> tuple[str, Mapping[str, Any]]:
    """The provider a site's section of ``kind`` names, and the settings it gives it."""
    section: Any = {"objects": site.objects, "registry": site.registry}.get(kind, site.secret_store)
    name = section.provider_name if kind == "registry" else section.provider
    return name, getattr(section, "settings", {})


def store_adapter(label: str, site: Site, plan: DrillPlan, store: str) -> Any:
    """The adapter of the site's object store ``store`` (``sites.*.object_stores``): built
    as the site's own would be, from a copy of the site whose ``objects`` is that store."""
    section = site.objects_for(store)
    as_site = site.model_copy(update={"objects": section})
    where = ProviderContext(label, plan, as_site, section.settings)
    return build("objects", section.provider, where)


def dns_adapter(plan: DrillPlan, *, timeout_s: float | None = None) -> Any:
    """The adapter of the plan's DNS, from the provider ``dns.provider`` names."""
    settings = getattr(plan.dns, "settings", {})
    return build("dns", plan.dns.provider, ProviderContext("dns", plan, None, settings, timeout_s))


def plan_providers(plan: DrillPlan) -> Iterator[tuple[str, Kind, str]]:
    """(field, kind, name) for every provider the plan selects, defaults included."""
    fields: dict[Kind, str] = {
        "objects": "objects.provider",
        "registry": "registry",
        "secrets": "secret_store.provider",
    }
    for role, site in plan.sites.items():
        for kind, field in fields.items():
            yield f"sites.{role}.{field}", kind, site_provider(site, kind)[0]
        for store, section in site.object_stores.items():
            yield f"sites.{role}.object_stores.{store}.provider", "objects", section.provider
    yield "dns.provider", "dns", plan.dns.provider


def unusable(plan: DrillPlan) -> list[tuple[str, str]]:
    """(field, one line) for each provider the plan names that cannot be used here."""
    problems: list[tuple[str, str]] = []
    for field, kind, name in plan_providers(plan):
        try:
            find(kind, name)
        except ProviderUnusableError as exc:
            problems.append((field, f"{exc.target} {exc.cause}"))
    return problems
