"""Watch streams: the store's change history, filtered and framed as JSON lines.

Selectors apply to both sides of a change, as in the real server: an object
that starts to match arrives as ADDED, one that stops matching as DELETED.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from drills_lab.kubeapi.api import WatchRequest
from drills_lab.kubeapi.selectors import fields_match, labels_match
from drills_lab.kubeapi.status import expired
from drills_lab.kubeapi.store import ResourceStore, StoreEvent
from drills_lab.kubeapi.tables import to_table

_MAX_WAIT = 1.0  # how often a quiet watch checks that the server is still running


def _matches(w: WatchRequest, obj: dict[str, Any] | None) -> bool:
    if obj is None:
        return False
    if w.namespace is not None and obj.get("metadata", {}).get("namespace") != w.namespace:
        return False
    return labels_match(w.labels, obj) and fields_match(w.fields, obj)


def event_type(w: WatchRequest, event: StoreEvent) -> str | None:
    """The event type this watch sees for a store event, or None when it sees nothing."""
    if event.resource != w.rt.plural:
        return None
    if event.type == "ADDED":
        return "ADDED" if _matches(w, event.obj) else None
    if event.type == "DELETED":
        return "DELETED" if _matches(w, event.old or event.obj) else None
    before, after = _matches(w, event.old), _matches(w, event.obj)
    if before and after:
        return "MODIFIED"
    if after:
        return "ADDED"
    return "DELETED" if before else None


def _line(w: WatchRequest, kind: str, obj: dict[str, Any]) -> bytes:
    if w.table:
        obj = to_table(w.rt, [obj], int(obj["metadata"]["resourceVersion"]))
    return json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() + b"\n"


def watch_lines(
    store: ResourceStore, w: WatchRequest, should_stop: Callable[[], bool]
) -> Iterator[bytes]:
    """Event lines until the watch times out or ``should_stop()`` says so."""
    deadline = time.monotonic() + w.timeout
    if w.since is None:
        items, cursor = store.snapshot(w.rt, w.namespace, w.labels, w.fields)
        for obj in items:
            yield _line(w, "ADDED", obj)
    else:
        cursor = w.since
    while not should_stop():
        events = store.events_since(cursor)
        if events is None:
            error = expired(f"too old resource version: {cursor} ({store.resource_version})")
            yield json.dumps({"type": "ERROR", "object": error.to_status()}).encode() + b"\n"
            return
        for event in events:
            cursor = event.rv
            kind = event_type(w, event)
            if kind is not None:
                yield _line(w, kind, event.obj)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        store.wait_for_change(cursor, min(remaining, _MAX_WAIT))
