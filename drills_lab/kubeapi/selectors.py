"""Label and field selectors, parsed once per request and matched per object."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from drills_lab.kubeapi.resources import ResourceType
from drills_lab.kubeapi.status import bad_request

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_TERM = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ_TERM = re.compile(rf"^\s*({_KEY})\s*(==|!=|=)\s*({_VALUE})\s*$")
_EXISTS_TERM = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: dict[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "!":
            return self.key not in labels
        if self.op == "in":
            return self.key in labels and labels[self.key] in self.values
        # notin, like "!=", also matches objects without the label
        return labels.get(self.key) not in self.values


def _split_terms(text: str) -> list[str]:
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    terms.append("".join(current))
    return [t for t in terms if t.strip()]


def parse_label_selector(text: str | None) -> tuple[Requirement, ...]:
    """Parse ``a=b,c!=d,e in (f,g),h notin (i),j,!k``; a bad term is a 400."""
    if not text or not text.strip():
        return ()
    requirements = []
    for term in _split_terms(text):
        if m := _SET_TERM.match(term):
            values = frozenset(v.strip() for v in m.group(4).split(",") if v.strip())
            requirements.append(Requirement(m.group(1), m.group(3), values))
        elif m := _EQ_TERM.match(term):
            op = "notin" if m.group(3) == "!=" else "in"
            requirements.append(Requirement(m.group(1), op, frozenset([m.group(4)])))
        elif m := _EXISTS_TERM.match(term):
            requirements.append(Requirement(m.group(2), "!" if m.group(1) else "exists"))
        else:
            raise bad_request(f"unable to parse requirement: invalid label selector {text!r}")
    return tuple(requirements)


def labels_match(requirements: tuple[Requirement, ...], obj: dict[str, Any]) -> bool:
    if not requirements:
        return True
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(r.matches(labels) for r in requirements)


def selector_string(selector: dict[str, Any] | None) -> str:
    """A LabelSelector object (matchLabels/matchExpressions) as selector text."""
    if not selector:
        return ""
    terms = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        if op == "In":
            terms.append(f"{key} in ({','.join(sorted(values))})")
        elif op == "NotIn":
            terms.append(f"{key} notin ({','.join(sorted(values))})")
        elif op == "Exists":
            terms.append(key)
        elif op == "DoesNotExist":
            terms.append(f"!{key}")
    return ",".join(terms)


@dataclass(frozen=True)
class FieldRequirement:
    path: tuple[str, ...]
    equal: bool
    value: str

    def matches(self, obj: dict[str, Any]) -> bool:
        node: Any = obj
        for part in self.path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, bool):
            actual = "true" if node else "false"
        else:
            actual = "" if node is None else str(node)
        return (actual == self.value) == self.equal


def parse_field_selector(text: str | None, rt: ResourceType) -> tuple[FieldRequirement, ...]:
    """Parse ``metadata.name=x,status.phase!=Running`` for the fields ``rt`` supports."""
    if not text or not text.strip():
        return ()
    requirements = []
    # A backslash escapes a comma or an equals sign inside a value.
    for term in re.split(r"(?<!\\),", text):
        if not term.strip():
            continue
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|!=|=)(.*)$", term)
        if m is None:
            raise bad_request(f"invalid selector: {text!r}; can't understand {term!r}")
        field, op, value = m.group(1), m.group(2), m.group(3).replace("\\", "")
        if not rt.supports_field(field):
            raise bad_request(f'field label not supported: {field} for "{rt.kind}"')
        requirements.append(FieldRequirement(tuple(field.split(".")), op != "!=", value))
    return tuple(requirements)


def fields_match(requirements: tuple[FieldRequirement, ...], obj: dict[str, Any]) -> bool:
    return all(r.matches(obj) for r in requirements)
