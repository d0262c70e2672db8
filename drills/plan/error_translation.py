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
import types
import typing
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from drills.errors import PlanProblem
from drills.plan.models.stores import EXTERNAL_TAG
from drills.plan.refs import describe, is_credential_key, safe_repr
from drills.plan.yamlfile import Loc, Position, YamlDocument
from drills.text import for_terminal

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
        elif _is_tag(current, part):
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
    if not isinstance(node, dict):
        return False
    if part == EXTERNAL_TAG and "provider" in node:
        return True  # a provider that is not built in: the union's tag, not a key
    return any(node.get(d) == part for d in _DISCRIMINATORS)


def position(doc: YamlDocument, present: Loc, at_key: bool) -> Position | None:
    if at_key and present in doc.keys:
        return doc.keys[present]
    for end in range(len(present), -1, -1):
        found = doc.values.get(present[:end])
        if found:
            return found
    return None


def translate(
    errors: Iterable[ErrorDetails], doc: YamlDocument, root: type[BaseModel]
) -> list[PlanProblem]:
    problems = []
    for error in errors:
        kind = error["type"]
        if kind == "too_short" and _long_enough(error):
            continue
        missing = kind == "missing"
        present, printed = locate(doc.data, tuple(error["loc"]), missing)
        at = position(doc, present, at_key=kind == "extra_forbidden")
        if kind == "extra_forbidden":
            allowed = fields_at(root, tuple(error["loc"])[:-1])
            message = unknown_field(str(printed[-1]) if printed else "", allowed)
        else:
            message = _message(error, printed)
        problems.append(doc.problem(at, printed, message))
    return problems


def _long_enough(error: ErrorDetails) -> bool:
    # pydantic counts only the items that validated, so a list whose items all
    # failed is also "too short"; the item errors already say what is wrong.
    value, ctx = error.get("input"), error.get("ctx") or {}
    return isinstance(value, list | tuple) and len(value) >= int(ctx.get("min_length", 0))


def _message(error: ErrorDetails, loc: Loc) -> str:
    kind = error["type"]
    ctx: dict[str, Any] = dict(error.get("ctx") or {})
    value = error.get("input")
    field = str(loc[-1]) if loc and isinstance(loc[-1], str) else "value"
    if kind.startswith("plan_"):
        return str(ctx.get("message", error["msg"]))
    if kind == "missing":
        return f"missing required field `{field}`"
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


# pydantic names one operator mistake after the field's Python type (`list_type`,
# `tuple_type`, `set_type`...); the plan's author only needs to know what was wanted.
_EXPECTED_TYPE = {
    **dict.fromkeys(
        ("model_type", "model_attributes_type", "dict_type", "dataclass_type"),
        "a mapping (key: value)",
    ),
    **dict.fromkeys(("list_type", "tuple_type", "iterable_type", "set_type"), "a list"),
    **dict.fromkeys(("string_type", "string_unicode", "string_sub_type", "path_type"), "a string"),
    **dict.fromkeys(("int_type", "int_parsing", "int_from_float"), "a whole number"),
    **dict.fromkeys(("float_type", "float_parsing", "finite_number"), "a number"),
    **dict.fromkeys(("bool_type", "bool_parsing"), "true or false"),
}

# Each bound's words, and the ctx key pydantic puts its limit under.
_BOUNDS = {
    "greater_than_equal": ("at least", "ge"),
    "greater_than": ("greater than", "gt"),
    "less_than_equal": ("at most", "le"),
    "less_than": ("less than", "lt"),
}


def _simple(kind: str, ctx: dict[str, Any], value: Any) -> str | None:
    if kind in _EXPECTED_TYPE:
        return f"must be {_EXPECTED_TYPE[kind]}, got {describe(value)}"
    if kind in _BOUNDS:
        words, key = _BOUNDS[kind]
        return f"must be {words} {ctx.get(key)} (got {safe_repr(value)})"
    return _wrong_length(kind, ctx)


def _wrong_length(kind: str, ctx: dict[str, Any]) -> str | None:
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
    return None


CREDENTIAL_KEY_HINT = (
    "credentials are never written in a plan; they go by reference "
    "(env:NAME, file:PATH or prefect:BLOCK) in the fields made for them: "
    "registry auth, credentials sections and dns tsig.secret"
)


def unknown_field(field: str, allowed: set[str]) -> str:
    """The message for a key the model does not know, with a suggestion drawn from the
    keys allowed at that place (never the key itself)."""
    shown = f"`{for_terminal(field)}`"
    if is_credential_key(field):
        return f"unknown field {shown} here; {CREDENTIAL_KEY_HINT}"
    candidates = sorted(name for name in allowed if name != field)
    close = difflib.get_close_matches(field, candidates, n=1, cutoff=0.75)
    if not close:
        # Case or separators only (`DR_Replicas`, `dr-replicas`): still the same key.
        squashed = {re.sub(r"[-_ ]", "", name.lower()): name for name in candidates}
        match = squashed.get(re.sub(r"[-_ ]", "", field.lower()))
        close = [match] if match else []
    hint = f"; did you mean `{close[0]}`?" if close else ""
    return f"unknown field {shown}{hint}"


def fields_at(root: type[BaseModel], loc: Loc) -> set[str]:
    """The keys allowed in the mapping at pydantic location ``loc`` below ``root``.

    Follows fields, list items and the tags pydantic adds for discriminated unions
    (``registry.oci``). An empty set when the location cannot be followed.
    """
    current: list[type[BaseModel]] = [root]
    for part in loc:
        if isinstance(part, int):
            continue  # a list item: the element type is already what we hold
        tagged = [m for m in current if _tag_of(m) == part]
        if tagged and len(current) > 1:
            current = tagged
            continue
        fields = [m.model_fields[part] for m in current if part in m.model_fields]
        if not fields:
            return set()
        current = _models_in(fields[0].annotation)
    return {name for model in current for name in model.model_fields}


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The model classes a field annotation can hold (through Optional, unions, tuples)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _models_in(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, tuple, list):
        return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]
    return []


def _tag_of(model: type[BaseModel]) -> str | None:
    """The discriminator value of a union member (``kind: oci`` -> ``"oci"``), if any."""
    if "settings" in model.model_fields and "provider" in model.model_fields:
        provider = model.model_fields["provider"]
        if typing.get_origin(provider.annotation) is not Literal:
            return EXTERNAL_TAG  # the member for a provider that is not built in
    for name in _DISCRIMINATORS:
        field = model.model_fields.get(name)
        if field is not None and typing.get_origin(field.annotation) is Literal:
            args = typing.get_args(field.annotation)
            return str(args[0]) if args else None
    return None


def _unquote(text: object) -> str:
    return str(text or "").strip("'\"").removesuffix("()")  # `kind()`: a callable's


def _or_list(text: object) -> str:
    names = [n for n in re.findall(r"'([^']*)'", str(text or "")) if n != EXTERNAL_TAG]
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " or " + names[-1]
