"""The thread-safe object store behind the lab API server.

One lock guards every object and one global resourceVersion counter, as etcd
gives the real server. Each write appends an event to a bounded history that
watches replay from; a condition variable wakes watchers and the controller
the moment anything changes.
"""

from __future__ import annotations

import builtins
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from drills_lab.kubeapi import strategy
from drills_lab.kubeapi.objects import clone, now_rfc3339
from drills_lab.kubeapi.resources import ResourceType, by_plural
from drills_lab.kubeapi.selectors import (
    FieldRequirement,
    Requirement,
    fields_match,
    labels_match,
    parse_label_selector,
)
from drills_lab.kubeapi.status import (
    already_exists,
    bad_request,
    conflict,
    namespace_not_found,
    not_found,
)

Key = tuple[str, str]  # (namespace or "", name)
Mutation = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class StoreEvent:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    resource: str
    obj: dict[str, Any]  # never mutated once recorded
    old: dict[str, Any] | None


class ResourceStore:
    """Objects by resource plural; every returned object is a private copy."""

    def __init__(self, history: int = 10_000) -> None:
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._rv = 0
        self._objects: dict[str, dict[Key, dict[str, Any]]] = {}
        self._events: deque[StoreEvent] = deque(maxlen=history)
        # Events at or below this version have left the history.
        self._horizon = 0
        self._wakes = 0  # bumped by wake_all, so waiters return without a change

    # -- reading ---------------------------------------------------------

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        rt = by_plural(resource)
        with self._lock:
            obj = self._table(rt).get(self._key(rt, namespace, name))
            return clone(obj) if obj is not None else None

    def list(
        self, resource: str, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        items, _ = self.snapshot(
            by_plural(resource), namespace, parse_label_selector(label_selector)
        )
        return items

    def snapshot(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: tuple[Requirement, ...] = (),
        fields: tuple[FieldRequirement, ...] = (),
    ) -> tuple[builtins.list[dict[str, Any]], int]:
        """Matching objects sorted by namespace and name, and the version they were read at."""
        with self._lock:
            table = self._table(rt)
            keys = sorted(k for k in table if namespace is None or k[0] == namespace)
            items = [
                clone(table[k])
                for k in keys
                if labels_match(labels, table[k]) and fields_match(fields, table[k])
            ]
            return items, self._rv

    def wait_for_change(self, since_rv: int, timeout: float) -> int:
        """Block until the version passes ``since_rv`` or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        with self._changed:
            wakes = self._wakes
            while self._rv <= since_rv and self._wakes == wakes:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(remaining)
            return self._rv

    def wake_all(self) -> None:
        """Wake every waiter, e.g. so watches notice the server is stopping."""
        with self._changed:
            self._wakes += 1
            self._changed.notify_all()

    def events_since(self, since_rv: int) -> builtins.list[StoreEvent] | None:
        """Events after ``since_rv`` in order, or None when they have left the history."""
        with self._lock:
            if since_rv < self._horizon:
                return None
            newer: builtins.list[StoreEvent] = []
            for event in reversed(self._events):
                if event.rv <= since_rv:
                    break
                newer.append(event)
            newer.reverse()
            return newer

    # -- writing ---------------------------------------------------------

    def create(
        self,
        resource: str,
        obj: dict[str, Any],
        *,
        namespace: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Store a new object; ``namespace`` defaults to the object's own, then "default"."""
        rt = by_plural(resource)
        with self._lock:
            stored = strategy.prepare_create(rt, obj, namespace, self._rv + 1, now_rfc3339())
            m = stored["metadata"]
            key = self._key(rt, m.get("namespace"), m["name"])
            if rt.namespaced:
                self._require_namespace(key[0])
            if key in self._table(rt):
                raise already_exists(rt, m["name"])
            if dry_run:
                del m["resourceVersion"]
                return stored
            self._commit(rt, key, "ADDED", stored, None)
            return clone(stored)

    def update(
        self,
        resource: str,
        obj: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Replace an object (PUT). A stale ``metadata.resourceVersion`` is a 409 Conflict."""
        rt = by_plural(resource)
        m = obj.get("metadata") or {}
        name = str(m.get("name") or "")
        if not name:
            raise bad_request("name is required to update an object")
        with self._lock:
            key = self._key(rt, namespace or m.get("namespace"), name)
            old = self._table(rt).get(key)
            if old is None:
                raise not_found(rt, name)
            sent = m.get("resourceVersion")
            if sent and sent != old["metadata"]["resourceVersion"]:
                raise conflict(rt, name)
            return self._replace(rt, key, old, obj, subresource, dry_run)

    def patch(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        mutate: Mutation,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Apply ``mutate`` to a copy of the current object atomically, then store the result.

        ``mutate`` may raise ``ApiError``. A patch that sets a resourceVersion
        other than the current one is a 409 Conflict, as with the real server.
        """
        rt = by_plural(resource)
        with self._lock:
            key = self._key(rt, namespace, name)
            old = self._table(rt).get(key)
            if old is None:
                raise not_found(rt, name)
            new = mutate(clone(old))
            current = old["metadata"]["resourceVersion"]
            if new.get("metadata", {}).get("resourceVersion", current) != current:
                raise conflict(rt, name)
            return self._replace(rt, key, old, new, subresource, dry_run)

    def delete(
        self, resource: str, namespace: str | None, name: str, *, dry_run: bool = False
    ) -> dict[str, Any]:
        """Remove an object and return it; a namespace takes its contents with it."""
        rt = by_plural(resource)
        with self._lock:
            key = self._key(rt, namespace, name)
            old = self._table(rt).get(key)
            if old is None:
                raise not_found(rt, name)
            if dry_run:
                return clone(old)
            if rt.plural == "namespaces":
                for table_name, table in list(self._objects.items()):
                    inner = by_plural(table_name)
                    for inner_key in [k for k in table if inner.namespaced and k[0] == name]:
                        self._remove(inner, inner_key)
            return clone(self._remove(rt, key))

    # -- internals -------------------------------------------------------

    def _table(self, rt: ResourceType) -> dict[Key, dict[str, Any]]:
        return self._objects.setdefault(rt.plural, {})

    @staticmethod
    def _key(rt: ResourceType, namespace: str | None, name: str) -> Key:
        return ((namespace or "default") if rt.namespaced else "", name)

    def _require_namespace(self, namespace: str) -> None:
        ns = self._objects.get("namespaces", {}).get(("", namespace))
        if ns is None:
            raise namespace_not_found(namespace)

    def _replace(
        self,
        rt: ResourceType,
        key: Key,
        old: dict[str, Any],
        body: dict[str, Any],
        subresource: str | None,
        dry_run: bool,
    ) -> dict[str, Any]:
        new = strategy.prepare_update(rt, old, body, subresource, self._rv + 1)
        unchanged = {k: v for k, v in new.items() if k != "metadata"} == {
            k: v for k, v in old.items() if k != "metadata"
        } and _meta_without_rv(new) == _meta_without_rv(old)
        if dry_run or unchanged:
            # A no-op write keeps its version and wakes nobody, as in the real server.
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            return new if dry_run else clone(old)
        self._commit(rt, key, "MODIFIED", new, old)
        return clone(new)

    def _remove(self, rt: ResourceType, key: Key) -> dict[str, Any]:
        old = self._table(rt).pop(key)
        gone = clone(old)
        gone["metadata"]["resourceVersion"] = str(self._rv + 1)
        self._record(StoreEvent(self._rv + 1, "DELETED", rt.plural, gone, old))
        return gone

    def _commit(
        self, rt: ResourceType, key: Key, kind: str, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        self._table(rt)[key] = obj
        self._record(StoreEvent(self._rv + 1, kind, rt.plural, obj, old))

    def _record(self, event: StoreEvent) -> None:
        if len(self._events) == self._events.maxlen:
            self._horizon = self._events[0].rv
        self._events.append(event)
        self._rv = event.rv
        self._changed.notify_all()


def _meta_without_rv(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.get("metadata", {}).items() if k != "resourceVersion"}
