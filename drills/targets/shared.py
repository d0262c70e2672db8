"""Targets shared between plans: one read of each system per run, however many plans ask.

Plans of one fleet often point at the same DR cluster, registry and buckets. When their
readiness runs together (`drills readiness --all`), each system should be asked once:
``SharedTargets`` keeps one adapter per *target identity* and remembers the answers of its
read-only calls for the rest of the run.

A target's identity is its role, its kind, its configuration (endpoints, contexts, regions)
and a keyed fingerprint of the credentials it uses, resolved from the plan's references and
the kubeconfig's bytes. Two plans share an adapter only when all of these match: the same
endpoint reached with other credentials may see other things. The key is drawn at random
per run, so identities compare within a run and never across; credentials are never kept.

Only reads are remembered, and only here: a drill's own Targets poll their systems and
never go through this cache.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

from pydantic import BaseModel

from drills.errors import DrillError
from drills.plan import DrillPlan, Site
from drills.plan.files import read_regular_file
from drills.plan.kubeconfig import MAX_KUBECONFIG_BYTES
from drills.plan.refs import SecretRef
from drills.targets.fingerprint import fingerprint, new_key

T = TypeVar("T")

# The read-only calls of each kind of adapter whose answers the run shares.
KUBE_READS = frozenset(
    {"version", "nodes", "workload", "pods", "secret", "ingress", "namespace", "config_map",
     "read", "list_items"}
)  # fmt: skip
REGISTRY_READS = frozenset({"digest", "digests"})
OBJECTS_READS = frozenset({"newest", "versioning", "lifecycle_rules", "checksums"})
SECRETS_READS = frozenset({"describe", "value"})
# check_control is a probe that changes nothing (a prerequisite-only update, a rejected batch).
DNS_READS = frozenset({"read", "check_control"})


def _freeze(value: Any) -> Any:
    """Arguments as a hashable key; an iterable argument becomes a tuple (an iterator is
    passed on as that tuple, so a generator is read once)."""
    if isinstance(value, str | bytes | int | float | bool | type(None)):
        return value
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple | set | frozenset | Iterator):
        items = tuple(_freeze(v) for v in value)
        return tuple(sorted(items, key=repr)) if isinstance(value, set | frozenset) else items
    return value  # hashable values (refs, enums) stay as they are


def _passed(given: Any, frozen: Any) -> Any:
    """What the adapter gets: an iterator as its frozen tuple (it can be read only once),
    anything else as given (a dict of path parameters stays a dict)."""
    return frozen if isinstance(given, Iterator) else given


class _Once:
    """Futures by key: the first caller computes, the others wait for its answer (or error)."""

    def __init__(self) -> None:
        self._futures: dict[Any, Future[Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: Any, compute: Callable[[], T]) -> T:
        with self._lock:
            future = self._futures.get(key)
            owner = future is None
            if future is None:
                future = self._futures[key] = Future()
        if owner:
            try:
                future.set_result(compute())
            except BaseException as exc:  # noqa: BLE001 - re-raised below, for every caller
                future.set_exception(exc)
        return future.result()

    def values(self) -> list[Any]:
        with self._lock:
            futures = list(self._futures.values())
        return [f.result() for f in futures if f.done() and f.exception() is None]


class SharedAdapter:
    """An adapter whose listed read calls are answered once per run and argument set.

    Answers are shared between the plans' checks as they are: checks read them, never
    change them.
    """

    def __init__(self, adapter: Any, reads: frozenset[str], answers: _Once, identity: str) -> None:
        self._adapter = adapter
        self._reads = reads
        self._answers = answers
        self._identity = identity

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._adapter, name)
        if name not in self._reads or not callable(value):
            return value

        def shared(*args: Any, **kwargs: Any) -> Any:
            frozen_args = tuple(_freeze(a) for a in args)
            frozen_kwargs = {k: _freeze(v) for k, v in kwargs.items()}
            key = (self._identity, name, frozen_args, tuple(sorted(frozen_kwargs.items())))
            passed_args = tuple(map(_passed, args, frozen_args))
            passed_kwargs = {k: _passed(v, frozen_kwargs[k]) for k, v in kwargs.items()}
            return self._answers.get(key, lambda: value(*passed_args, **passed_kwargs))

        return shared

    def __repr__(self) -> str:
        return f"Shared({self._adapter!r})"


def _credentials(value: Any, plan: DrillPlan) -> Iterator[str]:
    """The credentials a configuration section references, resolved, in a stable order."""
    if isinstance(value, SecretRef):
        yield plan.resolve_secret(value)
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _credentials(getattr(value, name), plan)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _credentials(item, plan)
    elif isinstance(value, dict):
        for key in sorted(value):
            yield from _credentials(value[key], plan)


class SharedTargets:
    """The adapters and answers of one run over many plans. Use it in ``with``."""

    def __init__(self) -> None:
        self._key = new_key()
        self._adapters = _Once()
        self._answers = _Once()

    def identity(self, plan: DrillPlan, role: str, kind: str, *sections: Any) -> str:
        """Role, kind, configuration and a keyed fingerprint of the credentials used.

        A credential that cannot be read gives a plan-own identity: that plan's adapter
        then fails as it would alone, and shares nothing.
        """
        config = [s.model_dump(mode="json") if isinstance(s, BaseModel) else s for s in sections]
        secret = b""
        try:
            resolved = [c for s in sections for c in _credentials(s, plan)]
            resolved += [_kubeconfig_bytes(plan, s) for s in sections]
            secret = "\0".join(resolved).encode()
        except (DrillError, OSError):
            config.append({"unshared": id(plan)})
        text = json.dumps([role, kind, config], sort_keys=True, default=str)
        return fingerprint(self._key, text.encode() + b"\0" + secret)

    def adapter(
        self, identity: str, build: Callable[[], T], reads: frozenset[str]
    ) -> SharedAdapter:
        """The one adapter of this identity for the run, built by the first plan asking."""
        return self._adapters.get(
            identity, lambda: SharedAdapter(build(), reads, self._answers, identity)
        )

    def once(self, key: Any, compute: Callable[[], T]) -> T:
        """A result computed once per run for ``key`` (e.g. a dataset's comparison)."""
        return self._answers.get(("once", key), compute)

    def close(self) -> None:
        for shared in self._adapters.values():
            closer = getattr(shared._adapter, "close", None)
            if closer is not None:
                closer()

    def __enter__(self) -> SharedTargets:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _kubeconfig_bytes(plan: DrillPlan, section: Any) -> str:
    """The kubeconfig a Kubernetes section names, as text (its credentials live there)."""
    path = getattr(section, "kubeconfig", None)
    if path is None or not hasattr(section, "in_cluster"):
        return ""
    # The one bounded reader: a FIFO or a /proc file named here must not hang the run.
    raw = read_regular_file(plan.resolve_path(path), MAX_KUBECONFIG_BYTES)
    return raw.decode(errors="replace")


def site_sections(site: Site, kind: str) -> tuple[Any, ...]:
    """The configuration sections that decide which system a site's adapter reaches."""
    if kind == "kube":
        return (site.kubernetes,)
    if kind == "registry":
        return (site.registry, site.aws)
    if kind == "objects":
        return (site.objects, site.aws)
    if kind.startswith("objects:"):  # a store of site.object_stores, by name
        return (site.objects_for(kind.partition(":")[2]), site.aws)
    if kind == "secrets":
        return (site.secret_store, site.aws)
    return (site.aws,)
