"""Whether a 404 from a Kubernetes API means "none here" or "not the API asked".

A misrouted proxy, a wrong path prefix or a stale ingress answers 404 to every path,
as an API server answers for an object or an API group that is not there. Read as
"none here", such a 404 makes checks pass on a cluster they never reached: no quota
in the way, no priority class missing, every secret "missing at DR". So, here and
only here:

- a list of a built-in type (core, apps, scheduling.k8s.io...) answered 404 is an
  error: every cluster serves those;
- a list of another group's type (Kueue's) answered 404 is empty only when the
  server's discovery answers as an API server does and does not list that group;
- one object answered 404 is absent only when the answer is the API server's own
  ``Status`` NotFound naming that object, and discovery lists its type.

What answers otherwise is a :class:`~drills.errors.MisroutedError`. Discovery
documents are read once per adapter, when a 404 first needs one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from drills.errors import MisroutedError, PermanentError
from drills.targets.kube.errors import MISROUTED_HINT, named_not_found

# API groups every conformant cluster serves: a 404 for one of their types is never "none".
BUILT_IN_GROUPS = frozenset(
    {"", "apps", "batch", "autoscaling", "policy", "networking.k8s.io", "scheduling.k8s.io",
     "rbac.authorization.k8s.io", "storage.k8s.io", "coordination.k8s.io"}
)  # fmt: skip


@dataclass(frozen=True)
class ResourcePath:
    """What a resource path asks for: a type of one group version, and maybe one object."""

    group: str
    version: str
    resource: str
    name: str | None  # None: the collection

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def discovery_path(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def built_in(self) -> bool:
        return self.group in BUILT_IN_GROUPS

    @property
    def what(self) -> str:
        kind = f"{self.resource} ({self.group_version})"
        return f"{kind} {self.name!r}" if self.name else kind


def resource_path(path: str, params: Mapping[str, str]) -> ResourcePath | None:
    """``/api/v1/namespaces/{namespace}/secrets/{name}`` and the like, parsed; None when
    the path names no resource type."""
    parts = [
        params.get(p[1:-1], p) if p.startswith("{") and p.endswith("}") else p
        for p in path.strip("/").split("/")
    ]
    if parts[0] == "api" and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[0] == "apis" and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]  # a namespaced type; /namespaces/NAME alone is a Namespace
    return ResourcePath(group, version, rest[0], rest[1] if len(rest) > 1 else None)


@contextmanager
def only_named_404s(path: str, params: Mapping[str, str]) -> Iterator[None]:
    """Let through a 404 that names the very object ``path`` asks for; any other 404 (of a
    list, of discovery, of ``/version``, or naming another object) was not this API's."""
    try:
        yield
    except MisroutedError:
        raise
    except PermanentError as exc:
        named = named_not_found(exc.__cause__)
        if named is None:
            raise
        found = resource_path(path, params)
        if found is not None and found.name == named:
            raise
        raise MisroutedError(
            exc.target, f"{exc.cause}, for a request of no such object: {MISROUTED_HINT}"
        ) from exc.__cause__


Get = Callable[[str], dict[str, Any]]


class Discovery:
    """One API server's discovery documents, read when a 404 needs telling apart."""

    def __init__(self, target: str, get: Get) -> None:
        self.target = target
        self._get = get  # GET one path as a JSON object; raises TargetError
        self._served: dict[str, frozenset[str]] = {}  # group version → its resource names
        self._groups: frozenset[str] | None = None  # every group version /apis lists
        self._lock = threading.Lock()

    def confirm_absent(self, path: str, params: Mapping[str, str], exc: PermanentError) -> None:
        """Return when a 404 of one object means it does not exist; raise MisroutedError
        when it came from something that is not this cluster's API."""
        found = resource_path(path, params)
        if found is None or found.name is None:
            raise self._misrouted(f"GET {path}", exc)
        if not found.built_in and not self._serves(found):
            return  # its API is not installed (no Kueue): no such object here
        if named_not_found(exc.__cause__) != found.name:
            raise self._misrouted(f"GET {path}", exc)
        if not self._serves(found):
            raise MisroutedError(
                self.target,
                f"{found.what}: answered 404, and discovery ({found.discovery_path}) does not "
                f"list {found.resource}: {MISROUTED_HINT}",
            )

    def confirm_not_served(self, path: str, params: Mapping[str, str], exc: PermanentError) -> None:
        """Return when a 404 of a collection means its API is not installed (no Kueue);
        raise MisroutedError for a built-in type, or a type discovery says is served."""
        found = resource_path(path, params)
        if found is None or found.name is not None or found.built_in:
            raise self._misrouted(f"list {found.what if found else path}", exc)
        if self._serves(found):
            raise MisroutedError(
                self.target,
                f"list {found.what}: answered 404 though discovery lists it: {MISROUTED_HINT}",
            )

    def _misrouted(self, what: str, exc: PermanentError) -> MisroutedError:
        if isinstance(exc, MisroutedError):
            return exc
        return MisroutedError(self.target, f"{what}: {exc.cause}: {MISROUTED_HINT}")

    def _serves(self, found: ResourcePath) -> bool:
        """Whether discovery lists the type; False only when the API server's discovery
        answers, and does not list its group version (an API that is not installed)."""
        names = self._served.get(found.group_version)
        if names is None:
            # An API that is not installed is remembered too: read once per adapter.
            names = self._resources(found) or frozenset()
            with self._lock:
                self._served[found.group_version] = names
        return found.resource in names

    def _resources(self, found: ResourcePath) -> frozenset[str] | None:
        """The resource names of the type's group version; None when it is not served."""
        try:
            document = self._get(found.discovery_path)
        except MisroutedError:
            if found.built_in or found.group_version in self._group_versions():
                raise
            return None  # /apis answers as an API server does, without this group version
        resources = document.get("resources")
        if document.get("kind") != "APIResourceList" or not isinstance(resources, list):
            raise MisroutedError(
                self.target,
                f"GET {found.discovery_path} is not an API resource list: {MISROUTED_HINT}",
            )
        return frozenset(str(r.get("name")) for r in resources if isinstance(r, dict))

    def _group_versions(self) -> frozenset[str]:
        """Every group version ``/apis`` lists; raises when ``/apis`` is not discovery."""
        if self._groups is not None:
            return self._groups
        document = self._get("/apis")
        groups = document.get("groups")
        if document.get("kind") != "APIGroupList" or not isinstance(groups, list):
            raise MisroutedError(
                self.target, f"GET /apis is not an API group list: {MISROUTED_HINT}"
            )
        found = frozenset(
            str(v.get("groupVersion"))
            for g in groups
            if isinstance(g, dict)
            for v in g.get("versions") or []
            if isinstance(v, dict)
        )
        with self._lock:
            self._groups = found
        return found
