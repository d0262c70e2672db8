"""An audit log of the lab API server: who asked for what, as RBAC would see it.

Each request becomes one event with the attributes the real API server's authorizer
decides on (verb, API group, resource, subresource, namespace, name; or the path of a
non-resource URL such as ``/version``), plus the reply's code and the client's
User-Agent, as a Kubernetes audit log at level Metadata records them, and the HTTP
method and the site whose server answered (so a test can count writes to one site). Bodies are
never recorded: a Secret read through the lab must not end up in a file.

The log is opt-in: in memory (``AuditLog()``, read with :meth:`AuditLog.events`), and
also as JSON lines in a file when given a path (``drills lab up --audit`` writes
``<site>.audit.jsonl`` in the state directory; read it with :func:`read_audit_file`).
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, replace
from pathlib import Path

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# HTTP methods as the authorizer names them, for requests on a resource.
_RESOURCE_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True)
class AuditEvent:
    """One request. ``resource`` is empty for a non-resource URL (then ``path`` says which)."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    code: int = 0
    user_agent: str = ""
    method: str = ""  # the HTTP method itself: a write is POST, PUT, PATCH or DELETE
    site: str = ""  # which site's server answered it

    @property
    def is_write(self) -> bool:
        return self.method in WRITE_METHODS

    @property
    def is_resource(self) -> bool:
        return bool(self.resource)


def resource_verb(method: str, *, named: bool, watch: bool) -> str:
    """The RBAC verb of a request on a resource, as the real server's RequestInfo gives it."""
    if method == "GET":
        if watch:
            return "watch"
        return "get" if named else "list"
    if method == "DELETE" and not named:
        return "deletecollection"
    return _RESOURCE_VERBS.get(method, method.lower())


class AuditLog:
    """Events in the order the server answered them; thread-safe."""

    def __init__(self, path: Path | None = None, site: str = "") -> None:
        self.path = path
        self.site = site
        self._events: list[AuditEvent] = []
        self._lock = threading.Lock()
        if path is not None:
            path.write_text("")  # a fresh log per server: events of an earlier lab are not ours

    def record(self, event: AuditEvent) -> None:
        event = replace(event, site=self.site)
        with self._lock:
            self._events.append(event)
            if self.path is not None:
                with self.path.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(asdict(event), separators=(",", ":")) + "\n")

    def events(self) -> list[AuditEvent]:
        with self._lock:
            return list(self._events)


def read_audit_file(path: Path) -> list[AuditEvent]:
    """The events of an audit file written by :class:`AuditLog`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [AuditEvent(**json.loads(line)) for line in lines if line.strip()]
