"""The built-in registry adapter of one site: OCI Distribution or Amazon ECR.

Each adapter's module, and the SDK it needs, is imported only when a plan names it.
"""

from __future__ import annotations

from drills.errors import PermanentError
from drills.plan import DrillPlan, EcrRegistry, OciRegistry, Site
from drills.targets.registry.images import Registry


def registry_for(role: str, site: Site, plan: DrillPlan) -> Registry:
    """The built-in registry adapter of one site (the ``oci`` and ``ecr`` providers),
    credentials resolved from the plan's references."""
    name = f"registry {role}"
    if isinstance(site.registry, EcrRegistry):
        from drills.targets.registry.ecr import EcrImages

        return EcrImages.for_site(name, site, plan)
    if not isinstance(site.registry, OciRegistry):
        raise PermanentError(name, f"provider {site.registry.provider_name!r} is not built in")
    from drills.targets.registry.oci import OciDistribution

    auth = site.registry.auth
    username = password = token = None
    if auth is not None:
        username = plan.resolve_value(auth.username) if auth.username else None
        password = plan.resolve_secret(auth.password) if auth.password else None
        token = plan.resolve_secret(auth.token) if auth.token else None
    return OciDistribution(
        str(site.registry.url), name=name, username=username, password=password, token=token
    )
