"""Plan YAML -> plain data, remembering where in the file every key and value came from.

PyYAML's composer gives a node graph in which every node has a start mark; we
build the Python data ourselves from that graph so that a validation error at
``workloads[3].tier`` can be pointed at a line and column. Building it
ourselves also lets us refuse what ``yaml.safe_load`` silently accepts:
duplicate keys, and alias bombs that expand a few lines into gigabytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from drills.errors import PlanProblem
from drills.plan.refs import credential_pattern

Loc = tuple[str | int, ...]
Position = tuple[int, int]

MAX_BYTES = 2 * 1024 * 1024  # a plan is a few kilobytes; anything this big is a mistake
MAX_DEPTH = 40  # deeper than any plan needs; also keeps pydantic far from recursion limits
MAX_NODES = 100_000  # caps alias expansion ("billion laughs") long before memory suffers

# libyaml, when PyYAML has it (its wheels do): it caps nesting at 1000 levels and
# scans in linear time, where the pure-Python scanner is quadratic in flow nesting.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"


@dataclass
class YamlDocument:
    """The data of one plan file, with 1-based positions of its values and keys."""

    source: str
    data: Any = None
    values: dict[Loc, Position] = field(default_factory=dict)
    keys: dict[Loc, Position] = field(default_factory=dict)
    problems: list[PlanProblem] = field(default_factory=list)

    def problem(self, position: Position | None, loc: Loc, message: str) -> PlanProblem:
        line, column = position if position else (None, None)
        return PlanProblem(self.source, line, column, format_loc(loc), message)


def format_loc(loc: Loc) -> str:
    """``("workloads", 3, "tier")`` -> ``"workloads[3].tier"``."""
    out = ""
    for part in loc:
        if isinstance(part, str) and credential_pattern(part):
            part = "<key not shown>"  # a key can hold a pasted credential too
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def read_plan_text(path: Path, source: str) -> tuple[str | None, list[PlanProblem]]:
    """Read a plan file as UTF-8 text; on failure return the problem instead."""

    def fail(message: str, line: int | None = None, column: int | None = None) -> Any:
        return None, [PlanProblem(source, line, column, "", message)]

    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return fail("the plan file does not exist")
    except IsADirectoryError:
        return fail("this is a directory, not a plan file")
    except PermissionError:
        return fail("the plan file cannot be read: permission denied")
    except OSError as exc:
        return fail(f"the plan file cannot be read: {exc.strerror or type(exc).__name__}")
    except ValueError:  # e.g. a NUL byte in the path
        return fail("this is not a valid file path")
    if len(raw) > MAX_BYTES:
        return fail(f"the plan file is larger than {MAX_BYTES // 1024} KiB; is it really a plan?")
    try:
        return raw.decode("utf-8-sig"), []
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        line = before.count(b"\n") + 1
        column = exc.start - (before.rfind(b"\n") + 1) + 1
        return fail(f"the plan file is not UTF-8 text (byte 0x{raw[exc.start]:02x})", line, column)


def parse_yaml(text: str, source: str) -> YamlDocument:
    """Compose ``text`` and build its data. Problems are collected, never raised."""
    doc = YamlDocument(source)
    if len(text) > MAX_BYTES:
        doc.problems.append(doc.problem(None, (), "the plan is too large to be a plan"))
        return doc
    try:
        # libyaml encodes the text to UTF-8 first; a lone surrogate (only possible in
        # text that did not come from a file) would escape as a UnicodeEncodeError.
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        at = _position_of_index(text, exc.start)
        doc.problems.append(doc.problem(at, (), "the plan contains a character that is not valid"))
        return doc
    try:
        root = yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as exc:
        doc.problems.append(_syntax_problem(doc, exc))
        return doc
    except yaml.reader.ReaderError as exc:
        line, column = _position_of_index(text, exc.position)
        doc.problems.append(
            doc.problem((line, column), (), "the plan contains a character YAML does not allow")
        )
        return doc
    except yaml.YAMLError as exc:
        doc.problems.append(doc.problem(None, (), f"invalid YAML: {exc}"))
        return doc
    except RecursionError:
        doc.problems.append(doc.problem(None, (), "the YAML is nested too deeply"))
        return doc
    if root is None:
        doc.problems.append(doc.problem(None, (), "the plan file is empty"))
        return doc
    builder = _Builder(doc)
    doc.data = builder.build(root, (), 0)
    if builder.exhausted:
        doc.data = None
    return doc


def _syntax_problem(doc: YamlDocument, exc: yaml.MarkedYAMLError) -> PlanProblem:
    mark = exc.problem_mark or exc.context_mark
    position = (mark.line + 1, mark.column + 1) if mark else None
    message = f"invalid YAML: {exc.problem or 'syntax error'}"
    if "duplicate anchor" in (exc.context or ""):
        message = "invalid YAML: this anchor (&name) is already defined earlier in the file"
    elif exc.context:
        message += f" ({exc.context})"
    return doc.problem(position, (), message)


def _position_of_index(text: str, index: int) -> Position:
    before = text[:index]
    return before.count("\n") + 1, index - (before.rfind("\n") + 1) + 1


def _shown(key: str) -> str:
    return "(not shown)" if credential_pattern(key) else f"`{key}`"


def _pos(node: Node) -> Position:
    return node.start_mark.line + 1, node.start_mark.column + 1


class _Builder:
    """Turns composed nodes into dicts, lists and scalars, recording positions."""

    def __init__(self, doc: YamlDocument) -> None:
        self.doc = doc
        self.nodes = 0
        self.exhausted = False
        self.constructor = yaml.SafeLoader("")

    def add(self, node: Node, loc: Loc, message: str) -> None:
        self.doc.problems.append(self.doc.problem(_pos(node), loc, message))

    def build(self, node: Node, loc: Loc, depth: int) -> Any:
        if self.exhausted:
            return None
        self.nodes += 1
        if self.nodes > MAX_NODES:
            self.exhausted = True
            message = f"the plan expands to more than {MAX_NODES} values; too many aliases?"
            self.add(node, (), message)
            return None
        if depth > MAX_DEPTH:
            self.exhausted = True
            self.add(node, (), f"the plan is nested more than {MAX_DEPTH} levels deep")
            return None
        self.doc.values.setdefault(loc, _pos(node))
        if isinstance(node, MappingNode):
            return self._mapping(node, loc, depth)
        if isinstance(node, SequenceNode):
            return [self.build(item, (*loc, i), depth + 1) for i, item in enumerate(node.value)]
        return self._scalar(node, loc)

    def _scalar(self, node: Node, loc: Loc) -> Any:
        try:
            return self.constructor.construct_object(node, deep=True)
        except (
            yaml.YAMLError,
            ValueError,
            TypeError,
            OverflowError,
            LookupError,
            AttributeError,
        ) as exc:
            # An explicit tag on text its constructor cannot take: !!python/object, an
            # integer too long to convert, an empty `!!int` (IndexError inside PyYAML),
            # a `!!timestamp` that is no date (AttributeError inside PyYAML).
            reason = "unsupported YAML tag" if isinstance(exc, yaml.YAMLError) else "unreadable"
            self.add(node, loc, f"this value cannot be read ({reason} {node.tag!r})")
            return None

    def _mapping(self, node: MappingNode, loc: Loc, depth: int) -> dict[Any, Any]:
        merged: dict[Any, Any] = {}
        explicit = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                self._merge(value_node, loc, depth, merged)
            else:
                explicit.append((key_node, value_node))
        # Explicit keys win over merged ones, as YAML's merge key specifies; they are
        # built after the merges so that their positions replace the merged ones.
        result = merged
        first_seen: dict[str, int] = {}
        for key_node, value_node in explicit:
            key = self._key(key_node, loc)
            if key is None:
                continue
            here = (*loc, key)
            if key in first_seen:
                self.add(
                    key_node,
                    here,
                    f"duplicate key {_shown(key)} (first defined on line {first_seen[key]})",
                )
            else:
                first_seen[key] = key_node.start_mark.line + 1
                self.doc.keys[here] = _pos(key_node)
            self.doc.values.pop(here, None)
            result[key] = self.build(value_node, here, depth + 1)
        return result

    def _merge(self, value_node: Node, loc: Loc, depth: int, into: dict[Any, Any]) -> None:
        sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
        for source in sources:
            if not isinstance(source, MappingNode):
                self.add(source, loc, "a merge key (<<) must refer to a mapping")
                continue
            built = self.build(source, loc, depth + 1)
            if isinstance(built, dict):
                for key, value in built.items():
                    into.setdefault(key, value)

    def _key(self, key_node: Node, loc: Loc) -> str | None:
        if not isinstance(key_node, ScalarNode):
            self.add(key_node, loc, "a key must be a plain word, not a list or mapping")
            return None
        # Keys are compared as written: `1:` or `on:` is the text "1"/"on", not a number/bool.
        if key_node.tag != _STR_TAG and key_node.value in ("", "~", "null"):
            self.add(key_node, loc, "a key cannot be empty")
            return None
        return str(key_node.value)
