"""What the server does to an object on create and update, before storing it.

Like the real API server's registry strategies: server-managed metadata is
set here and nowhere else, status and spec are kept apart for resources with
a status subresource, and generation follows spec changes.
"""

from __future__ import annotations

import secrets
import uuid
from typing import Any

from drills_lab.kubeapi.defaults import apply_defaults
from drills_lab.kubeapi.objects import clone, meta
from drills_lab.kubeapi.resources import ResourceType
from drills_lab.kubeapi.status import bad_request, invalid
from drills_lab.kubeapi.validation import validate, validate_update

# Resources whose status a create request cannot set (the real strategies
# reset it); nodes keep theirs because a kubelet registers with its status.
_STATUS_RESET_ON_CREATE = frozenset(
    {"deployments", "statefulsets", "pods", "services", "ingresses", "jobs"}
)
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def random_suffix(length: int = 5) -> str:
    return "".join(secrets.choice(_NAME_ALPHABET) for _ in range(length))


def _check_shape(obj: dict[str, Any]) -> None:
    # What the real server's decoder rejects before any strategy runs.
    for field in ("metadata", "spec", "status"):
        if field in obj and not isinstance(obj[field], dict):
            raise bad_request(f"{field}: expected an object, got {type(obj[field]).__name__}")


def _set_type(rt: ResourceType, obj: dict[str, Any]) -> None:
    _check_shape(obj)
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if (kind and kind != rt.kind) or (api_version and api_version != rt.api_version):
        raise bad_request(
            f"the API version in the data ({api_version}) does not match the expected "
            f"API version ({rt.api_version}) and kind ({rt.kind})"
        )
    obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind


def prepare_create(
    rt: ResourceType, body: dict[str, Any], namespace: str | None, rv: int, now: str
) -> dict[str, Any]:
    """The object as it will be stored; raises ``ApiError`` when it is invalid."""
    obj = clone(body)
    _set_type(rt, obj)
    m = meta(obj)
    if rt.namespaced:
        m["namespace"] = namespace or m.get("namespace") or "default"
    else:
        m.pop("namespace", None)
    if not m.get("name"):
        if not m.get("generateName"):
            raise invalid(
                rt, "", [("metadata.name", "Required value: name or generateName is required")]
            )
        m["name"] = f"{m['generateName']}{random_suffix()}"
    for managed in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
        m.pop(managed, None)
    m["uid"] = str(uuid.uuid4())
    m["creationTimestamp"] = now
    m["generation"] = 1
    m["resourceVersion"] = str(rv)
    if rt.plural in _STATUS_RESET_ON_CREATE:
        obj.pop("status", None)
    apply_defaults(rt.plural, obj)
    causes = validate(rt.plural, obj)
    if causes:
        raise invalid(rt, m["name"], causes)
    return obj


def prepare_update(
    rt: ResourceType,
    old: dict[str, Any],
    body: dict[str, Any],
    subresource: str | None,
    rv: int,
) -> dict[str, Any]:
    """The object that replaces ``old``; ``subresource`` is None or "status"."""
    if subresource == "status":
        # A status write changes status only; metadata and spec stay as stored.
        _check_shape(body)
        obj = clone(old)
        obj["status"] = clone(body.get("status") or {})
    else:
        obj = clone(body)
        _set_type(rt, obj)
        if rt.has_status:
            if "status" in old:
                obj["status"] = clone(old["status"])
            else:
                obj.pop("status", None)
        apply_defaults(rt.plural, obj)
    m, om = meta(obj), old["metadata"]
    for kept in ("uid", "creationTimestamp", "name", "namespace", "generation"):
        if kept in om:
            m[kept] = om[kept]
        else:
            m.pop(kept, None)
    m.pop("managedFields", None)
    if subresource is None and obj.get("spec") != old.get("spec"):
        m["generation"] = int(om.get("generation", 1)) + 1
    m["resourceVersion"] = str(rv)
    causes = validate(rt.plural, obj) + validate_update(rt.plural, old, obj)
    if causes:
        raise invalid(rt, m["name"], causes)
    return obj
