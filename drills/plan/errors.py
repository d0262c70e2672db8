"""Pydantic validation errors -> located, operator-worded :class:`PlanProblem` s.

Pydantic says ``Field required`` at ``('sites', 'primary', 'registry', 'oci', 'url')``;
an operator wants ``plan.yaml:14:7: sites.primary.registry.url: missing required
field `url```. This module finds the YAML node behind each error location and
rewrites the message. It never puts an error's ``input`` in a message except
through :func:`drills.plan.refs.safe_repr`, and only for enum-like fields.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Any

from pydantic_core import ErrorDetails

from drills.errors import PlanProblem
from drills.plan.refs import describe, safe_repr
from drills.plan.yamlfile import Loc, Position, YamlDocument

_DISCRIMINATORS = ("kind", "mode", "provider")


def locate(data: Any, loc: Loc, missing: bool) -> tuple[Loc, Loc]:
    """Split a pydantic ``loc`` into (the part present in ``data``, the path to print).

    Discriminated unions add their tag to ``loc`` (``registry.oci.url``); the tag
    is dropped. A part absent from the data (a missing field, or a rule about an
    omitted field) ends the present part but stays in the printed path.
    """
    present: list[str | int] = []
    printed: list[str | int] = []
    current = data
    parts = list(loc)
    for i, part in enumerate(parts):
        if missing and i == len(parts) - 1:
            printed.append(part)
            break
        if _has(current, part):
            current = current[part]
        elif isinstance(current, dict) and any(current.get(d) == part for d in _DISCRIMINATORS):
            continue
        else:
            printed.extend(p for p in parts[i:] if not _is_tag(current, p))
            return tuple(present), tuple(printed)
        present.append(part)
        printed.append(part)
    return tuple(present), tuple(printed)


def _has(node: Any, part: str | int) -> bool:
    if isinstance(node, dict):
        return part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)


def _is_tag(node: Any, part: str | int) -> bool:
    return isinstance(node, dict) and any(node.get(d) == part for d in _DISCRIMINATORS)


def position(doc: YamlDocument, present: Loc, at_key: bool) -> Position | None:
    if at_key and present in doc.keys:
        return doc.keys[present]
    for end in range(len(present), -1, -1):
        found = doc.values.get(present[:end])
        if found:
            return found
    return None


def translate(
    errors: Iterable[ErrorDetails], doc: YamlDocument, vocabulary: set[str]
) -> list[PlanProblem]:
    problems = []
    for error in errors:
        kind = error["type"]
        if kind == "too_short" and _long_enough(error):
            continue
        missing = kind == "missing"
        present, printed = locate(doc.data, tuple(error["loc"]), missing)
        at = position(doc, present, at_key=kind == "extra_forbidden")
        message = _message(error, printed, vocabulary)
        problems.append(doc.problem(at, printed, message))
    return problems


def _long_enough(error: ErrorDetails) -> bool:
    # pydantic counts only the items that validated, so a list whose items all
    # failed is also "too short"; the item errors already say what is wrong.
    value, ctx = error.get("input"), error.get("ctx") or {}
    return isinstance(value, list | tuple) and len(value) >= int(ctx.get("min_length", 0))


def _message(error: ErrorDetails, loc: Loc, vocabulary: set[str]) -> str:
    kind = error["type"]
    ctx: dict[str, Any] = dict(error.get("ctx") or {})
    value = error.get("input")
    field = str(loc[-1]) if loc and isinstance(loc[-1], str) else "value"
    if kind.startswith("plan_"):
        return str(ctx.get("message", error["msg"]))
    if kind == "missing":
        return f"missing required field `{field}`"
    if kind == "extra_forbidden":
        return _unknown_field(field, vocabulary)
    if kind in ("enum", "literal_error"):
        allowed = ", ".join(re.findall(r"'([^']*)'", str(ctx.get("expected", ""))))
        return f"must be one of: {allowed} (got {safe_repr(value)})"
    if kind == "union_tag_invalid":
        return (
            f"unknown {field} {_unquote(ctx.get('discriminator'))} {safe_repr(ctx.get('tag'))}; "
            f"expected {_or_list(ctx.get('expected_tags'))}"
        )
    if kind == "union_tag_not_found":
        tag = _unquote(ctx.get("discriminator"))
        return f"missing required field `{tag}` (the {field} {tag})"
    simple = _simple(kind, ctx, value)
    if simple:
        return simple
    # A pydantic message we have not reworded; these never include the input value.
    return str(error["msg"])


def _simple(kind: str, ctx: dict[str, Any], value: Any) -> str | None:
    got = describe(value)
    if kind in ("model_type", "model_attributes_type", "dict_type", "dataclass_type"):
        return f"must be a mapping (key: value), got {got}"
    if kind in ("list_type", "tuple_type", "iterable_type", "set_type"):
        return f"must be a list, got {got}"
    if kind in ("string_type", "string_unicode", "string_sub_type", "path_type"):
        return f"must be a string, got {got}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"must be a whole number, got {got}"
    if kind in ("float_type", "float_parsing", "finite_number"):
        return f"must be a number, got {got}"
    if kind in ("bool_type", "bool_parsing"):
        return f"must be true or false, got {got}"
    if kind == "string_too_short":
        return (
            "must not be empty"
            if ctx.get("min_length") == 1
            else (f"must be at least {ctx.get('min_length')} characters long")
        )
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters long"
    if kind == "too_short":
        n = ctx.get("min_length")
        return f"must list at least {n} item{'s' if n != 1 else ''}"
    if kind == "too_long":
        return f"must list at most {ctx.get('max_length')} items"
    bounds = {
        "greater_than_equal": ("at least", "ge"),
        "greater_than": ("greater than", "gt"),
        "less_than_equal": ("at most", "le"),
        "less_than": ("less than", "lt"),
    }
    if kind in bounds:
        words, key = bounds[kind]
        return f"must be {words} {ctx.get(key)} (got {safe_repr(value)})"
    return None


def _unknown_field(field: str, vocabulary: set[str]) -> str:
    close = difflib.get_close_matches(field, sorted(vocabulary), n=1, cutoff=0.75)
    hint = f"; did you mean `{close[0]}`?" if close else ""
    return f"unknown field `{field}`{hint}"


def _unquote(text: object) -> str:
    return str(text or "").strip("'\"")


def _or_list(text: object) -> str:
    names = re.findall(r"'([^']*)'", str(text or ""))
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " or " + names[-1]


def schema_vocabulary(schema: dict[str, Any]) -> set[str]:
    """Every property name anywhere in a JSON schema: the words a plan may use as keys."""
    names: set[str] = set()
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            props = node.get("properties")
            if isinstance(props, dict):
                names.update(props)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return names
