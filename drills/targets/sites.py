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
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from drills.plan import DrillPlan, Site

if TYPE_CHECKING:
    from drills.targets.dns import DnsTarget
    from drills.targets.kube import KubeTarget
    from drills.targets.objects import ObjectStore
    from drills.targets.registry import Registry
    from drills.targets.secrets import AwsSecrets

Role = Literal["primary", "dr"]
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
    def __init__(self, role: Role, plan: DrillPlan, label: str | None = None) -> None:
        self.role = role
        # What errors and evidence call the site: its role, unless the plan is seen the
        # other way round (the failback direction), where the primary plays DR.
        self.label = label or role
        self.plan = plan
        self.site: Site = getattr(plan.sites, role)
        self._cache = _Lazy()

    @property
    def kube(self) -> KubeTarget:
        from drills.targets.kube import KubeTarget

        return self._cache.get(
            "kube", lambda: KubeTarget.for_site(self.label, self.site, self.plan)
        )

    @property
    def registry(self) -> Registry:
        from drills.targets.registry import registry_for

        return self._cache.get("registry", lambda: registry_for(self.label, self.site, self.plan))

    @property
    def objects(self) -> ObjectStore:
        from drills.targets.objects import ObjectStore

        return self._cache.get(
            "objects", lambda: ObjectStore.for_site(self.label, self.site, self.plan)
        )

    @property
    def aws_secrets(self) -> AwsSecrets:
        from drills.targets.secrets import AwsSecrets

        return self._cache.get(
            "aws_secrets", lambda: AwsSecrets.for_site(self.label, self.site, self.plan)
        )

    def close(self) -> None:
        for adapter in self._cache.values():
            closer = getattr(adapter, "close", None)
            if closer is not None:
                closer()


class Targets:
    """All adapters of one plan: ``targets.primary``, ``targets.dr``, ``targets.dns``."""

    def __init__(self, plan: DrillPlan, *, reverse: bool = False) -> None:
        """``reverse``: ``plan`` is a reversed plan (drills.plan.reverse), whose "primary"
        is the real DR site: the adapters name each site by what it really is."""
        self.plan = plan
        labels: tuple[Role, Role] = ("dr", "primary") if reverse else ("primary", "dr")
        self.primary = SiteTargets("primary", plan, labels[0])
        self.dr = SiteTargets("dr", plan, labels[1])
        self._cache = _Lazy()

    def site(self, role: Role) -> SiteTargets:
        return self.primary if role == "primary" else self.dr

    @property
    def dns(self) -> DnsTarget:
        from drills.targets.dns import dns_for

        return self._cache.get("dns", lambda: dns_for(self.plan))

    def close(self) -> None:
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
