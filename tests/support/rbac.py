"""RBAC as the API server's authorizer evaluates it, for checking shipped roles against
the requests the lab's audit log recorded (drills_lab/kubeapi/audit.py).

The rule semantics are Kubernetes' (plugin/pkg/auth/authorizer/rbac/rbac.go and
pkg/apis/rbac/v1/evaluation_helpers.go): a request is allowed when one rule matches its
API group, its resource (``resource`` or ``resource/subresource``; ``*`` any resource or
subresource, ``*/scale`` one subresource of any resource; ``pods/*`` is no wildcard), its
verb (``*`` any) and, when the rule names any, its resourceNames (a request without a
name — list, watch, create — matches no rule that names resources).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from drills_lab.kubeapi.audit import AuditEvent

ALL = "*"

# Non-resource URLs every authenticated client may read through the default cluster roles
# system:discovery and system:public-info-viewer (bound to system:authenticated): a role
# of drills need not, and cannot in a Role, grant them.
DEFAULT_NON_RESOURCE_URLS = (
    "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*",
    "/readyz", "/version", "/version/",
)  # fmt: skip


@dataclass(frozen=True)
class Rule:
    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...] = ()

    @classmethod
    def of(cls, data: dict[str, Any]) -> Rule:
        return cls(
            tuple(data.get("apiGroups") or ()),
            tuple(data.get("resources") or ()),
            tuple(data.get("verbs") or ()),
            tuple(data.get("resourceNames") or ()),
        )

    def allows(self, event: AuditEvent) -> bool:
        return (
            _has(self.api_groups, event.group)
            and self._resource_matches(event)
            and _has(self.verbs, event.verb)
            and (not self.resource_names or event.name in self.resource_names)
        )

    def _resource_matches(self, event: AuditEvent) -> bool:
        combined = f"{event.resource}/{event.subresource}" if event.subresource else event.resource
        for granted in self.resources:
            if granted in (ALL, combined):
                return True
            if event.subresource and granted == f"*/{event.subresource}":
                return True
        return False

    def grants(self) -> Iterator[Grant]:
        """Each (group, resource, verb, name) this rule grants, one by one."""
        for group in self.api_groups:
            for resource in self.resources:
                for verb in self.verbs:
                    for name in self.resource_names or ("",):
                        yield Grant(group, resource, verb, name)


@dataclass(frozen=True)
class Grant:
    group: str
    resource: str  # "deployments/scale" for a subresource
    verb: str
    name: str  # "" when the rule names no resources

    def __str__(self) -> str:
        group = self.group or "core"
        return f"{self.verb} {group}/{self.resource}" + (f" named {self.name}" if self.name else "")

    def used_by(self, event: AuditEvent) -> bool:
        names = (self.name,) if self.name else ()
        return Rule((self.group,), (self.resource,), (self.verb,), names).allows(event)


def _has(values: Iterable[str], wanted: str) -> bool:
    return any(v in (ALL, wanted) for v in values)


def load_rules(path: Path, kind: str = "ClusterRole") -> list[Rule]:
    """The rules of the one ``kind`` document in a YAML file of several."""
    roles = [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == kind]
    assert len(roles) == 1, f"{path}: expected one {kind}, found {len(roles)}"
    return [Rule.of(r) for r in roles[0].get("rules") or []]


def allowed(rules: Iterable[Rule], event: AuditEvent) -> bool:
    """Whether ``event`` passes ``rules``; a non-resource URL passes the default roles."""
    if not event.is_resource:
        return (
            any(
                event.path == url or (url.endswith("/*") and event.path.startswith(url[:-1]))
                for url in DEFAULT_NON_RESOURCE_URLS
            )
            and event.verb == "get"
        )
    return any(rule.allows(event) for rule in rules)


def describe(event: AuditEvent) -> str:
    """A request kind in one line: what a rule would have to grant."""
    if not event.is_resource:
        return f"{event.verb} {event.path}"
    resource = f"{event.resource}/{event.subresource}" if event.subresource else event.resource
    where = f" in {event.namespace}" if event.namespace else " (cluster)"
    name = f" named {event.name}" if event.name else ""
    return f"{event.verb} {event.group or 'core'}/{resource}{where}{name}"
