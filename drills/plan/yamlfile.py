"""Plan YAML -> plain data, remembering where in the file every key and value came from.

PyYAML's composer gives a node graph in which every node has a start mark; we
build the Python data ourselves from that graph so that a validation error at
``workloads[3].tier`` can be pointed at a line and column. Building it
ourselves also lets us refuse what ``yaml.safe_load`` silently accepts:
duplicate keys; tags that turn text into something else (``!!binary`` hides a
password from every check that reads strings); and alias bombs, which expand a
few lines into gigabytes, or one big string into thousands of copies that each
cost a scan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from drills.errors import PlanProblem
from drills.plan.files import FileRefusedError, read_regular_file
from drills.plan.refs import credential_pattern
from drills.text import for_terminal

Loc = tuple[str | int, ...]
Position = tuple[int, int]

MAX_BYTES = 2 * 1024 * 1024  # a plan is a few kilobytes; anything this big is a mistake
MAX_DEPTH = 40  # deeper than any plan needs; also keeps pydantic far from recursion limits
# What aliases may add to a file, beyond what it holds itself. Every later step (the
# build, the credential scan, validation) costs in proportion to the expanded data, so
# this, not a node count, is what bounds the work. A plan uses an alias or two for a
# shared section; a large value repeated thousands of times is an attack or an accident.
MAX_ALIAS_VALUES = 100_000
MAX_ALIAS_CHARS = 1024 * 1024

_YAML = "tag:yaml.org,2002:"
_MERGE_TAG = _YAML + "merge"
_STR_TAG = _YAML + "str"
# What a plan is made of. Every other tag (!!binary, !!set, !!omap, !!timestamp,
# !!python/..., !custom) makes a value that is not what its text says.
_PLAIN_TAGS = frozenset(_YAML + t for t in ("str", "int", "float", "bool", "null", "seq", "map"))


def _loader_class() -> Any:
    # libyaml, when PyYAML has it (its wheels do): it caps nesting at 1000 levels and
    # scans in linear time, where the pure-Python scanner is quadratic in flow nesting.
    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    # Without the implicit timestamp, `2024-01-01` stays the text it is; so any
    # timestamp tag left is an explicit `!!timestamp`, which is refused.
    resolvers = {
        first: [(tag, regexp) for tag, regexp in entries if tag != _YAML + "timestamp"]
        for first, entries in base.yaml_implicit_resolvers.items()
    }
    return type("PlanLoader", (base,), {"yaml_implicit_resolvers": resolvers})


_LOADER: Any = _loader_class()


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
    """``("workloads", 3, "tier")`` -> ``"workloads[3].tier"``; keys shown safely."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        if credential_pattern(part):
            part = "<key not shown>"  # a key can hold a pasted credential too
        part = for_terminal(part)  # and an ESC sequence, as any text can
        out += f".{part}" if out else part
    return out


def nearest_position(positions: dict[Loc, Position], loc: Loc) -> Position | None:
    """Where ``loc`` is written, or else the nearest section that holds it."""
    # A defaulted field (max_ttl left out) points at the section that omitted it.
    for end in range(len(loc), -1, -1):
        if loc[:end] in positions:
            return positions[loc[:end]]
    return None


def read_plan_text(path: Path, source: str) -> tuple[str | None, list[PlanProblem]]:
    """Read a plan file as UTF-8 text; on failure return the problem instead."""

    def fail(message: str, line: int | None = None, column: int | None = None) -> Any:
        return None, [PlanProblem(source, line, column, "", message)]

    try:
        raw = read_regular_file(path, MAX_BYTES)
    except FileRefusedError as exc:
        if exc.reason.startswith("is larger"):
            return fail(f"the plan file {exc.reason}; is it really a plan?")
        if exc.reason.startswith("is "):
            return fail(f"this {exc.reason}; give a plan file")
        return fail(f"this is not a valid file path ({exc.reason})")
    except FileNotFoundError:
        return fail("the plan file does not exist")
    except PermissionError:
        return fail("the plan file cannot be read: permission denied")
    except OSError as exc:
        return fail(f"the plan file cannot be read: {exc.strerror or type(exc).__name__}")
    except ValueError:  # e.g. a path the OS cannot take
        return fail("this is not a valid file path")
    try:
        return raw.decode("utf-8-sig"), []
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        line = before.count(b"\n") + 1
        column = exc.start - (before.rfind(b"\n") + 1) + 1
        return fail(f"the plan file is not UTF-8 text (byte 0x{raw[exc.start]:02x})", line, column)


def parse_yaml(text: str, source: str, *, max_bytes: int = MAX_BYTES) -> YamlDocument:
    """Compose ``text`` and build its data. Problems are collected, never raised."""
    doc = YamlDocument(source)
    if len(text) > max_bytes:
        limit = f"{max_bytes // (1024 * 1024)} MiB"
        doc.problems.append(doc.problem(None, (), f"the text is larger than {limit}"))
        return doc
    try:
        # libyaml encodes the text to UTF-8 first; a lone surrogate (only possible in
        # text that did not come from a file) would escape as a UnicodeEncodeError.
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        at = _position_of_index(text, exc.start)
        doc.problems.append(doc.problem(at, (), "the plan contains a character that is not valid"))
        return doc
    root = _compose(doc, text)
    if root is None:
        if not doc.problems:
            doc.problems.append(doc.problem(None, (), "the plan file is empty"))
        return doc
    # An alias (`*name`) needs an anchor (`&name`): without both characters nothing can
    # expand, and the count is skipped (a cron schedule's `*` alone is no alias).
    too_much = _expansion_problem(root) if "*" in text and "&" in text else None
    if too_much:
        node, message = too_much
        doc.problems.append(doc.problem(_pos(node), (), message))
        return doc
    builder = _Builder(doc)
    doc.data = builder.build(root, (), 0)
    if builder.exhausted:
        doc.data = None
    return doc


def _expansion_problem(root: Node) -> tuple[Node, str] | None:
    """Say so when aliases expand the file past the limits; counted without building.

    Sizes are memoised per node, so this costs what the file holds, not what it expands
    to. The problem points at the anchor whose repetition costs most.
    """
    memo: dict[int, tuple[int, int]] = {}
    repeats: dict[int, tuple[Node, int]] = {}
    own = [0, 0]  # values and characters that the file itself holds

    def size(node: Node, depth: int) -> tuple[int, int]:
        known = memo.get(id(node))
        if known is not None:
            repeats[id(node)] = (node, repeats.get(id(node), (node, 0))[1] + 1)
            return known
        memo[id(node)] = (1, 0)  # a recursive anchor refers to itself: count it once
        text = len(node.value) if isinstance(node, ScalarNode) else 0
        own[0] += 1
        own[1] += text
        if isinstance(node, ScalarNode) or depth > MAX_DEPTH:  # too deep: the build says so
            result = (1, text)
        else:
            children = node.value if isinstance(node, SequenceNode) else _pairs(node)
            sizes = [size(child, depth + 1) for child in children]
            result = (1 + sum(n for n, _ in sizes), sum(c for _, c in sizes))
        memo[id(node)] = result
        return result

    values, chars = size(root, 0)
    if values - own[0] > MAX_ALIAS_VALUES:
        what = f"more than {MAX_ALIAS_VALUES:,} values"
        field = 0
    elif chars - own[1] > MAX_ALIAS_CHARS:
        what = f"more than {MAX_ALIAS_CHARS // (1024 * 1024)} MiB of text"
        field = 1
    else:
        return None
    node, count = max(repeats.values(), key=lambda item: memo[id(item[0])][field] * item[1])
    message = (
        f"aliases (*name) expand this file by {what}, far beyond any plan; the anchor "
        f"here is repeated {count:,} times"
    )
    return node, message


def _pairs(node: Node) -> list[Node]:
    return [part for pair in node.value for part in pair]


def _compose(doc: YamlDocument, text: str) -> Node | None:
    try:
        node: Node | None = yaml.compose(text, Loader=_LOADER)
        return node
    except yaml.MarkedYAMLError as exc:
        doc.problems.append(_syntax_problem(doc, exc))
    except yaml.reader.ReaderError as exc:
        line, column = _position_of_index(text, exc.position)
        doc.problems.append(
            doc.problem((line, column), (), "the plan contains a character YAML does not allow")
        )
    except yaml.YAMLError as exc:
        doc.problems.append(doc.problem(None, (), f"invalid YAML: {for_terminal(str(exc))}"))
    except RecursionError:
        doc.problems.append(doc.problem(None, (), "the YAML is nested too deeply"))
    return None


def _syntax_problem(doc: YamlDocument, exc: yaml.MarkedYAMLError) -> PlanProblem:
    mark = exc.problem_mark or exc.context_mark
    position = (mark.line + 1, mark.column + 1) if mark else None
    message = f"invalid YAML: {exc.problem or 'syntax error'}"
    if "duplicate anchor" in (exc.context or ""):
        message = "invalid YAML: this anchor (&name) is already defined earlier in the file"
    elif exc.context:
        message += f" ({exc.context})"
    return doc.problem(position, (), for_terminal(message))


def _position_of_index(text: str, index: int) -> Position:
    before = text[:index]
    return before.count("\n") + 1, index - (before.rfind("\n") + 1) + 1


def _shown(key: str) -> str:
    return "(not shown)" if credential_pattern(key) else f"`{for_terminal(key)}`"


def _pos(node: Node) -> Position:
    return node.start_mark.line + 1, node.start_mark.column + 1


def shown_tag(tag: str) -> str:
    """A tag as a plan writes it: ``!!binary``, ``!custom`` (never a credential)."""
    short = "!!" + tag[len(_YAML) :] if tag.startswith(_YAML) else tag
    if len(short) > 40 or credential_pattern(short):
        return "a custom tag"
    return f"`{for_terminal(short)}`"


def _tag_problem(tag: str) -> str:
    return (
        f"this value cannot be read: the YAML tag {shown_tag(tag)} is not allowed in a plan "
        "(only plain text, numbers, true/false, null, lists and mappings)"
    )


class _Builder:
    """Turns composed nodes into dicts, lists and scalars, recording positions."""

    def __init__(self, doc: YamlDocument) -> None:
        self.doc = doc
        self.exhausted = False
        self.constructor = yaml.SafeLoader("")

    def add(self, node: Node, loc: Loc, message: str) -> None:
        self.doc.problems.append(self.doc.problem(_pos(node), loc, message))

    def build(self, node: Node, loc: Loc, depth: int) -> Any:
        if self.exhausted:
            return None
        if depth > MAX_DEPTH:
            self.exhausted = True
            self.add(node, (), f"the plan is nested more than {MAX_DEPTH} levels deep")
            return None
        self.doc.values.setdefault(loc, _pos(node))
        if node.tag not in _PLAIN_TAGS:
            self.add(node, loc, _tag_problem(node.tag))
            return None
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
        ):
            # A plain tag on text its constructor cannot take: an integer too long to
            # convert, an empty `!!int` (IndexError inside PyYAML).
            self.add(node, loc, f"this value cannot be read as {shown_tag(node.tag)}")
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
        if key_node.tag not in _PLAIN_TAGS:
            self.add(key_node, loc, _tag_problem(key_node.tag))
            return None
        # Keys are compared as written: `1:` or `on:` is the text "1"/"on", not a number/bool.
        if key_node.tag != _STR_TAG and key_node.value in ("", "~", "null"):
            self.add(key_node, loc, "a key cannot be empty")
            return None
        return str(key_node.value)
