"""Build every adapter a plan needs, lazily, once: the composition root of targets.

Checks and steps ask ``Targets`` for a site's Kubernetes, registry, object
storage or Secrets Manager adapter, or for the plan's DNS; each adapter is made
on first use (so a check run that touches only DNS never reads a kubeconfig)
and shared by every check of the run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from drills.plan import DrillPlan, Site
from drills.targets.shared import (
    DNS_READS,
    KUBE_READS,
    OBJECTS_READS,
    REGISTRY_READS,
    SECRETS_READS,
    SharedTargets,
    site_sections,
)

if TYPE_CHECKING:
    from drills.targets.dns import DnsTarget
    from drills.targets.kube import KubeTarget
    from drills.targets.objects import ObjectStore
    from drills.targets.provider_api import Kind, SecretStoreAdapter
    from drills.targets.registry import Registry
    from drills.targets.secrets import AwsSecrets

Role = Literal["primary", "dr"]


def store_kind(store: str | None) -> str:
    """The adapter kind of a dataset's object store (``Dataset.store``): ``objects`` for
    the site's own, ``objects:NAME`` for one of ``sites.*.object_stores``."""
    return "objects" if store is None else f"objects:{store}"


ROLES: tuple[Role, ...] = ("primary", "dr")
T = TypeVar("T")


@dataclass
class _Lazy:
    """A per-key cache safe under concurrent checks: each adapter is built once.

    One lock per key: checks needing different adapters must not queue behind
    each other's (slow) client construction.
    """

    _values: dict[str, Any] = field(default_factory=dict)
    _locks: dict[str, threading.Lock] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def get(self, key: str, build: Callable[[], T]) -> T:
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._values:
                self._values[key] = build()
            return self._values[key]

    def values(self) -> list[Any]:
        with self._guard:
            return list(self._values.values())


class SiteTargets:
    def __init__(
        self,
        role: Role,
        plan: DrillPlan,
        label: str | None = None,
        shared: SharedTargets | None = None,
    ) -> None:
        self.role = role
        # What errors and evidence call the site: its role, unless the plan is seen the
        # other way round (the failback direction), where the primary plays DR.
        self.label = label or role
        self.plan = plan
        self.site: Site = getattr(plan.sites, role)
        self._shared = shared
        self._cache = _Lazy()

    def identity(self, kind: str) -> str:
        """Which system this site's ``kind`` adapter reaches: the same string for two plans
        only when they share it (within one run over many plans)."""
        shared = self._shared
        if shared is None:
            return f"{self.role}:{kind}"
        sections = site_sections(self.site, kind)
        return self._cache.get(
            f"identity:{kind}", lambda: shared.identity(self.plan, self.role, kind, *sections)
        )

    def _adapter(self, kind: str, build: Callable[[], Any], reads: frozenset[str]) -> Any:
        """This site's adapter, or the run's shared one when plans share their targets."""
        shared = self._shared
        if shared is None:
            return self._cache.get(kind, build)
        return self._cache.get(kind, lambda: shared.adapter(self.identity(kind), build, reads))

    @property
    def kube(self) -> KubeTarget:
        from drills.targets.kube import KubeTarget

        return cast(
            "KubeTarget",
            self._adapter(
                "kube", lambda: KubeTarget.for_site(self.label, self.site, self.plan), KUBE_READS
            ),
        )

    def _provided(self, kind: Kind, reads: frozenset[str]) -> Any:
        """The adapter the provider of this site's ``kind`` section builds."""
        from drills.targets.providers import site_adapter

        return self._adapter(
            kind, lambda: site_adapter(kind, self.label, self.site, self.plan), reads
        )

    @property
    def registry(self) -> Registry:
        return cast("Registry", self._provided("registry", REGISTRY_READS))

    @property
    def objects(self) -> ObjectStore:
        # Typed as the S3 store, whose methods ObjectStoreAdapter names: what the checks call.
        return cast("ObjectStore", self._provided("objects", OBJECTS_READS))

    def objects_for(self, store: str | None) -> ObjectStore:
        """The object store a dataset names (``Dataset.store``); the site's own for None."""
        if store is None:
            return self.objects
        from drills.targets.providers import store_adapter

        adapter = self._adapter(
            store_kind(store),
            lambda: store_adapter(self.label, self.site, self.plan, store),
            OBJECTS_READS,
        )
        return cast("ObjectStore", adapter)

    @property
    def secret_store(self) -> SecretStoreAdapter:
        """The site's secret store (sites.*.secret_store), for the plan's secrets.store."""
        return cast("SecretStoreAdapter", self._provided("secrets", SECRETS_READS))

    @property
    def aws_secrets(self) -> AwsSecrets:
        """AWS Secrets Manager, for the plan's secrets.aws, whatever the secret store is."""
        from drills.targets.provider_api import ProviderContext
        from drills.targets.providers import build

        where = ProviderContext(self.label, self.plan, self.site)
        return cast(
            "AwsSecrets",
            self._adapter(
                "aws_secrets",
                lambda: build("secrets", "aws-secrets-manager", where),
                SECRETS_READS,
            ),
        )

    def close(self) -> None:
        if self._shared is not None:
            return  # the run's SharedTargets closes what its plans shared
        for adapter in self._cache.values():
            closer = getattr(adapter, "close", None)
            if closer is not None:
                closer()


class Targets:
    """All adapters of one plan: ``targets.primary``, ``targets.dr``, ``targets.dns``.

    Given ``shared``, the plan's adapters are the run's shared ones (see
    drills.targets.shared): for readiness over many plans, never for a drill.
    """

    def __init__(
        self, plan: DrillPlan, shared: SharedTargets | None = None, *, reverse: bool = False
    ) -> None:
        """``reverse``: ``plan`` is a reversed plan (drills.plan.reverse), whose "primary"
        is the real DR site: the adapters name each site by what it really is."""
        self.plan = plan
        self._shared = shared
        labels: tuple[Role, Role] = ("dr", "primary") if reverse else ("primary", "dr")
        self.primary = SiteTargets("primary", plan, labels[0], shared)
        self.dr = SiteTargets("dr", plan, labels[1], shared)
        self._cache = _Lazy()
        self._own = SharedTargets() if shared is None else None

    def once(self, key: Any, compute: Callable[[], T]) -> T:
        """``compute`` once per key for this plan's run, or for the whole shared run."""
        runs = self._shared or self._own
        assert runs is not None
        return runs.once(key, compute)

    def site(self, role: Role) -> SiteTargets:
        return self.primary if role == "primary" else self.dr

    @property
    def dns(self) -> DnsTarget:
        from drills.targets.providers import dns_adapter

        shared = self._shared
        if shared is None:
            return cast("DnsTarget", self._cache.get("dns", lambda: dns_adapter(self.plan)))

        def build() -> DnsTarget:
            identity = shared.identity(self.plan, "-", "dns", self.plan.dns)
            return cast(
                "DnsTarget", shared.adapter(identity, lambda: dns_adapter(self.plan), DNS_READS)
            )

        return self._cache.get("dns", build)

    def close(self) -> None:
        if self._shared is not None:
            return  # the run's SharedTargets closes what its plans shared
        self.primary.close()
        self.dr.close()
        for adapter in self._cache.values():
            closer = getattr(adapter, "close", None)
            if closer is not None:
                closer()

    def __enter__(self) -> Targets:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
