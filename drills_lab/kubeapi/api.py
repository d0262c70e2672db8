"""Request routing and the REST verbs, independent of the HTTP transport.

``KubeApi.handle`` turns a parsed request into a ``Reply`` (a JSON body and
a code) or a ``WatchRequest`` that the transport streams.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from drills_lab.kubeapi import discovery
from drills_lab.kubeapi.audit import AuditEvent, AuditLog, resource_verb
from drills_lab.kubeapi.patch import apply_patch, decode
from drills_lab.kubeapi.podrun import LogBook
from drills_lab.kubeapi.resources import ResourceType, lookup
from drills_lab.kubeapi.scale import scale_of, scale_patch, scale_update
from drills_lab.kubeapi.selectors import (
    FieldRequirement,
    Requirement,
    parse_field_selector,
    parse_label_selector,
)
from drills_lab.kubeapi.status import (
    ApiError,
    bad_request,
    method_not_allowed,
    not_found,
    path_not_found,
    success,
)
from drills_lab.kubeapi.store import ResourceStore
from drills_lab.kubeapi.tables import to_table, wants_table

HEALTH_PATHS = ("/healthz", "/livez", "/readyz")
# Deleting these returns the object, as the real server does; others return a Status.
_DELETE_RETURNS_OBJECT = frozenset({"pods", "services", "namespaces"})
_NAMESPACE_MISMATCH = (
    "the namespace of the provided object does not match the namespace sent on the request"
)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    accept: str = "application/json"
    content_type: str = ""
    body: bytes = b""
    user_agent: str = ""


@dataclass(frozen=True)
class Reply:
    code: int
    body: Any  # a JSON value, or bytes sent as they are
    content_type: str = "application/json"

    def encode(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        return json.dumps(self.body, separators=(",", ":")).encode()


@dataclass(frozen=True)
class WatchRequest:
    rt: ResourceType
    namespace: str | None
    labels: tuple[Requirement, ...]
    fields: tuple[FieldRequirement, ...]
    since: int | None  # None: start with the current state as ADDED events
    timeout: float
    table: bool


@dataclass(frozen=True)
class _Target:
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


def _at(parts: list[str], index: int) -> str | None:
    return parts[index] if index < len(parts) else None


def _true(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true")


def _split(path: str) -> tuple[str, str, list[str]] | None:
    """(group, version, the parts after it) of an API path; None for any other path."""
    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) >= 2:
        return "", parts[1], parts[2:]
    if parts[0] == "apis" and len(parts) >= 3:
        return parts[1], parts[2], parts[3:]
    return None


def _selected_name(query: dict[str, str]) -> str:
    """The name a list or watch is narrowed to by ``fieldSelector=metadata.name=NAME``:
    the real server authorizes it as a request for that name (resourceNames apply)."""
    terms = [term.strip() for term in query.get("fieldSelector", "").split(",") if term.strip()]
    for term in terms:
        for operator in ("==", "="):
            field, sep, value = term.partition(operator)
            if sep and field.strip() == "metadata.name":
                return value.strip()
    return ""


def _audit_namespace(t: _Target) -> str:
    # As the real RequestInfo: /api/v1/namespaces/NAME is in namespace NAME, so a Role
    # in that namespace may grant reading it.
    if t.rt.plural == "namespaces" and t.name is not None:
        return t.name
    return t.namespace or ""


class KubeApi:
    def __init__(
        self, store: ResourceStore, version: tuple[int, int], max_watch: float = 1800.0
    ) -> None:
        self.store = store
        self.version = version
        self.max_watch = max_watch
        self.server_address = ""
        self.audit: AuditLog | None = None
        self.logs = LogBook()

    def handle(self, req: Request) -> Reply | WatchRequest:
        try:
            result = self._route(req)
        except ApiError as exc:
            result = Reply(exc.code, exc.to_status())
        if self.audit is not None:
            code = result.code if isinstance(result, Reply) else 200
            self.audit.record(self._audit_event(req, code))
        return result

    def _audit_event(self, req: Request, code: int) -> AuditEvent:
        """The request as the authorizer sees it; an unknown resource counts as a URL."""
        path = req.path.rstrip("/") or "/"
        split = _split(path)
        if split is not None and split[2]:
            group, version, rest = split
            try:
                t = self._target(group, version, rest)
            except ApiError:
                pass
            else:
                watch = _true(req.query.get("watch"))
                return AuditEvent(
                    verb=resource_verb(req.method, named=t.name is not None, watch=watch),
                    group=group,
                    resource=t.rt.plural,
                    subresource=t.subresource or "",
                    namespace=_audit_namespace(t),
                    name=t.name or _selected_name(req.query),
                    path=path,
                    code=code,
                    user_agent=req.user_agent,
                    method=req.method,
                )
        return AuditEvent(verb=req.method.lower(), path=path, code=code, user_agent=req.user_agent,
                          method=req.method)  # fmt: skip

    # -- routing ---------------------------------------------------------

    def _route(self, req: Request) -> Reply | WatchRequest:
        path = req.path.rstrip("/") or "/"
        if path in HEALTH_PATHS or path.startswith(tuple(p + "/" for p in HEALTH_PATHS)):
            return Reply(200, b"ok", "text/plain; charset=utf-8")
        fixed = self._fixed_document(path, req.accept)
        if fixed is not None:
            if req.method != "GET":
                raise method_not_allowed(req.method)
            return fixed
        split = _split(path)
        if split is None:
            raise path_not_found()
        group, version, rest = split
        if not rest:
            listing = discovery.api_resource_list(group, version)
            if listing is None:
                raise path_not_found()
            return Reply(200, listing)
        return self._verb(req, self._target(group, version, rest))

    def _fixed_document(self, path: str, accept: str) -> Reply | None:
        major, minor = self.version
        if path == "/version":
            return Reply(200, discovery.version_info(major, minor))
        if path == "/api":
            return Reply(200, discovery.api_versions(self.server_address))
        if path == "/apis":
            return Reply(200, discovery.api_group_list())
        if path.startswith("/apis/") and path.count("/") == 2:
            group = discovery.api_group(path.split("/")[2])
            if group is None:
                raise path_not_found()
            return Reply(200, group)
        if path == "/openapi/v2":
            if "protobuf" in accept:
                return Reply(200, b"", discovery.OPENAPI_V2_PROTOBUF)
            git_version = discovery.version_info(major, minor)["gitVersion"]
            return Reply(200, discovery.openapi_v2_json(git_version))
        if path == "/openapi/v3":
            return Reply(200, discovery.openapi_v3_root())
        return None

    @staticmethod
    def _target(group: str, version: str, rest: list[str]) -> _Target:
        # /namespaces/<ns>/<plural>/... is a namespaced path; /namespaces/<name> is a Namespace.
        rt = lookup(group, version, rest[2]) if rest[0] == "namespaces" and len(rest) >= 3 else None
        if rt is not None:
            if not rt.namespaced or len(rest) > 5:
                raise path_not_found()
            namespace: str | None = rest[1]
            name, sub = _at(rest, 3), _at(rest, 4)
        else:
            rt = lookup(group, version, rest[0])
            if rt is None or len(rest) > 3 or (rt.namespaced and len(rest) > 1):
                raise path_not_found()
            namespace = None
            name, sub = _at(rest, 1), _at(rest, 2)
        if sub is not None and sub not in rt.subresources:
            raise path_not_found()
        return _Target(rt, namespace, name, sub)

    def _verb(self, req: Request, t: _Target) -> Reply | WatchRequest:
        dry_run = self._dry_run(req.query)
        if t.subresource == "log":
            return self._log(req, t)
        if req.method == "GET":
            if t.name is None:
                return self._list(req, t)
            return self._get(req, t)
        if req.method == "POST" and t.name is None:
            return self._create(req, t, dry_run)
        if req.method == "PUT" and t.name is not None:
            return self._update(req, t, dry_run)
        if req.method == "PATCH" and t.name is not None:
            return self._patch(req, t, dry_run)
        if req.method == "DELETE" and t.name is not None and t.subresource is None:
            return self._delete(t, dry_run)
        raise method_not_allowed(req.method)

    @staticmethod
    def _dry_run(query: dict[str, str]) -> bool:
        value = query.get("dryRun")
        if value is None:
            return False
        if value != "All":
            raise bad_request(f'dryRun: Unsupported value: "{value}": supported values: "All"')
        return True

    # -- verbs -----------------------------------------------------------

    def _get(self, req: Request, t: _Target) -> Reply:
        assert t.name is not None
        obj = self.store.get(t.rt.plural, t.namespace, t.name)
        if obj is None:
            raise not_found(t.rt, t.name)
        if t.subresource == "scale":
            return Reply(200, scale_of(obj))
        if wants_table(req.accept) and t.subresource is None:
            rv = int(obj["metadata"]["resourceVersion"])
            return Reply(200, to_table(t.rt, [obj], rv, req.query.get("includeObject", "Metadata")))
        return Reply(200, obj)

    def _log(self, req: Request, t: _Target) -> Reply:
        """``pods/NAME/log``: what the pod's container printed (``tailLines`` honoured)."""
        if req.method != "GET":
            raise method_not_allowed(req.method)
        assert t.name is not None and t.namespace is not None
        if self.store.get("pods", t.namespace, t.name) is None:
            raise not_found(t.rt, t.name)
        tail = req.query.get("tailLines", "")
        if tail and not tail.lstrip("-").isdigit():
            raise bad_request(f"tailLines: invalid value {tail!r}")
        text = self.logs.read(t.namespace, t.name, int(tail) if tail else None)
        return Reply(200, text.encode(), "text/plain")

    def _list(self, req: Request, t: _Target) -> Reply | WatchRequest:
        labels = parse_label_selector(req.query.get("labelSelector"))
        fields = parse_field_selector(req.query.get("fieldSelector"), t.rt)
        if _true(req.query.get("watch")):
            return self._watch(req, t, labels, fields)
        items, rv = self.store.snapshot(t.rt, t.namespace, labels, fields)
        if wants_table(req.accept):
            return Reply(200, to_table(t.rt, items, rv, req.query.get("includeObject", "Metadata")))
        return Reply(
            200,
            {
                "kind": f"{t.rt.kind}List",
                "apiVersion": t.rt.api_version,
                "metadata": {"resourceVersion": str(rv)},
                "items": items,
            },
        )

    def _watch(
        self,
        req: Request,
        t: _Target,
        labels: tuple[Requirement, ...],
        fields: tuple[FieldRequirement, ...],
    ) -> WatchRequest:
        rv_text = req.query.get("resourceVersion", "")
        if rv_text and not rv_text.isdigit():
            raise bad_request(f"invalid resource version: {rv_text}")
        since = int(rv_text) if rv_text and rv_text != "0" else None
        timeout_text = req.query.get("timeoutSeconds", "")
        timeout = float(timeout_text) if timeout_text.isdigit() else self.max_watch
        return WatchRequest(
            t.rt,
            t.namespace,
            labels,
            fields,
            since,
            min(timeout, self.max_watch),
            wants_table(req.accept),
        )

    def _body(self, req: Request) -> dict[str, Any]:
        body = decode(req.body)
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        return body

    def _create(self, req: Request, t: _Target, dry_run: bool) -> Reply:
        if t.subresource is not None:
            raise method_not_allowed(req.method)
        body = self._body(req)
        sent_ns = (body.get("metadata") or {}).get("namespace")
        if t.rt.namespaced and sent_ns and sent_ns != t.namespace:
            raise bad_request(_NAMESPACE_MISMATCH)
        created = self.store.create(t.rt.plural, body, namespace=t.namespace, dry_run=dry_run)
        return Reply(201, created)

    def _update(self, req: Request, t: _Target, dry_run: bool) -> Reply:
        assert t.name is not None
        body = self._body(req)
        m = body.setdefault("metadata", {})
        if m.get("name", t.name) != t.name:
            raise bad_request(
                f"the name of the object ({m['name']}) does not match the name on the URL "
                f"({t.name})"
            )
        if t.rt.namespaced and m.get("namespace", t.namespace) != t.namespace:
            raise bad_request(_NAMESPACE_MISMATCH)
        m["name"] = t.name
        if t.subresource == "scale":
            updated = self.store.patch(
                t.rt.plural, t.namespace, t.name, scale_update(body), dry_run=dry_run
            )
            return Reply(200, scale_of(updated))
        updated = self.store.update(
            t.rt.plural, body, namespace=t.namespace, subresource=t.subresource, dry_run=dry_run
        )
        return Reply(200, updated)

    def _patch(self, req: Request, t: _Target, dry_run: bool) -> Reply:
        assert t.name is not None
        if t.subresource == "scale":
            mutate = scale_patch(req.content_type, req.body)
            updated = self.store.patch(t.rt.plural, t.namespace, t.name, mutate, dry_run=dry_run)
            return Reply(200, scale_of(updated))
        updated = self.store.patch(
            t.rt.plural,
            t.namespace,
            t.name,
            lambda obj: apply_patch(req.content_type, obj, req.body),
            subresource=t.subresource,
            dry_run=dry_run,
        )
        return Reply(200, updated)

    def _delete(self, t: _Target, dry_run: bool) -> Reply:
        assert t.name is not None
        gone = self.store.delete(t.rt.plural, t.namespace, t.name, dry_run=dry_run)
        if t.rt.plural in _DELETE_RETURNS_OBJECT:
            return Reply(200, gone)
        return Reply(200, success(t.rt, t.name, gone["metadata"]["uid"]))
