"""Generate the reference pages at build time, from the registries of the code.

Nothing here is written into the repository: each page is handed to MkDocs as a generated
file, so a command, plan field, check, metric, notification event or exit code that the code
gains appears in the reference on the next build, and one it loses disappears. The text is
the code's own: Typer help, pydantic Field descriptions, check docstrings, metric help.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

SCHEMA_URL = "schema/plan.schema.json"


def _text(value: str) -> str:
    """Prose from the code, safe inside Markdown: no raw HTML, no table breaks."""
    return html.escape(" ".join(value.split()), quote=False).replace("|", "\\|")


def _block(value: str) -> str:
    """A docstring's paragraphs kept, its text escaped as in _text."""
    paragraphs = [p for p in value.split("\n\n") if p.strip()]
    return "\n\n".join(_text(p) for p in paragraphs)


# --- CLI --------------------------------------------------------------------------------


def _walk(name: str, command: Any) -> Iterator[tuple[str, Any]]:
    yield name, command
    for sub_name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _walk(f"{name} {sub_name}", sub)


def cli_commands() -> list[tuple[str, Any]]:
    """Every command of the drills app, as (`drills plan validate`, click command), in order."""
    from drills.cli.app import COMMANDS, load_commands

    seen: dict[str, Any] = {}
    for name, entry in COMMANDS.items():
        if name not in seen:
            for found, command in load_commands(entry.module).items():
                seen.setdefault(found, command)
    out: list[tuple[str, Any]] = []
    for name in COMMANDS:
        out.extend(_walk(f"drills {name}", seen[name]))
    return out


def _param(param: Any, ctx: Any) -> str:
    """One option or argument as `--help` shows it: its flags, type, default and env var."""
    if param.param_type_name == "argument":
        name = (param.metavar or param.name).upper().strip("[]")
        kind = param.display_type(ctx).strip("<>")
        head = f"`{name}` (argument{', ' + kind if kind else ''}"
        head += ", required)" if param.required else ")"
        return f"- {head}: {_text(param.help or '')}"
    flags, help_text = param.get_help_record(ctx) or ("", "")
    return f"- `{flags}`: {_text(help_text)}"


def cli_page() -> str:
    lines = [
        "# CLI reference",
        "",
        "Every command and option of `drills`, generated from its Typer app: the same text as "
        "`--help`. Exit codes are listed in [Exit codes](exit-codes.md).",
        "",
    ]
    for name, command in cli_commands():
        depth = name.count(" ")
        lines += [f"{'#' * min(depth + 1, 4)} `{name}`", "", _block(command.help or ""), ""]
        ctx = command.context_class(command, info_name=name)
        params = [p for p in command.params if p.name != "help"]
        if params:
            lines += [*(_param(p, ctx) for p in params), ""]
    return "\n".join(lines)


# --- plan format ------------------------------------------------------------------------


def _type(spec: dict[str, Any]) -> str:
    if "$ref" in spec:
        target = spec["$ref"].rsplit("/", 1)[-1]
        return f"[{target}](#{target.lower()})"
    if "anyOf" in spec or "oneOf" in spec:
        return " or ".join(_type(s) for s in spec.get("anyOf", spec.get("oneOf", [])))
    if "enum" in spec:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in spec["enum"])
    if "const" in spec:
        return f"`{json.dumps(spec['const'])}`"
    kind = spec.get("type", "any")
    if kind == "array":
        return f"list of {_type(spec.get('items', {}))}"
    if kind == "object" and isinstance(spec.get("additionalProperties"), dict):
        return f"map of {_type(spec['additionalProperties'])}"
    return f"`{kind}`"


def plan_fields(schema: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any], bool]]:
    """(model, field, its schema, required) for every field of every model of a plan."""
    models = {"DrillPlan": schema, **schema.get("$defs", {})}
    for model, spec in models.items():
        required = set(spec.get("required", ()))
        for field, field_spec in spec.get("properties", {}).items():
            yield model, field, field_spec, field in required


def plan_page() -> str:
    from drills.plan import plan_schema

    schema = plan_schema()
    lines = [
        "# Plan format",
        "",
        "Every field of a drill plan, generated from the pydantic models: the same types, "
        "defaults and descriptions as the JSON Schema that `drills plan schema` prints and "
        f"that is published at [`{SCHEMA_URL}`](../{SCHEMA_URL}) for editors. "
        "Durations are seconds or strings with units (`45s`, `15m`, `1h30m`, `2d`). "
        "The top of a plan file is [DrillPlan](#drillplan).",
        "",
    ]
    for model, spec in {"DrillPlan": schema, **schema.get("$defs", {})}.items():
        lines += ["", f"## {model}", ""]
        if spec.get("description"):
            lines += [_block(spec["description"]), ""]
        if "enum" in spec:
            lines += ["One of " + ", ".join(f"`{json.dumps(v)}`" for v in spec["enum"]) + "."]
        fields = [(f, s, r) for m, f, s, r in plan_fields(schema) if m == model]
        if fields:
            lines += ["| Field | Type | Default | Description |", "|---|---|---|---|"]
        for field, field_spec, required in fields:
            default = "required" if required else f"`{json.dumps(field_spec.get('default'))}`"
            cells = [f"`{field}`", _type(field_spec), default,
                     _text(field_spec.get("description", ""))]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# --- checks, metrics, events, exit codes ------------------------------------------------


def checks() -> list[Any]:
    from drills.checks.catalog import CATEGORIES, load_checks

    order = {category: i for i, category in enumerate(CATEGORIES)}
    return sorted(load_checks().all(), key=lambda s: (order.get(s.category, 99), s.id))


def checks_page() -> str:
    lines = [
        "# Readiness checks",
        "",
        "Every readiness check, generated from the check registry: its id (for "
        "`drills readiness --only`), category (for `--category`), what it reads, when it "
        "blocks, when it warns (or fails without blocking), what to do about it, its time "
        "limit, and its docstring. Each result also carries a remediation written for the "
        "problem found. A check that cannot read what it judges (unreachable, timed out) is "
        "an error, and an error always blocks.",
        "",
    ]
    category = None
    for spec in checks():
        if spec.category != category:
            category = spec.category
            lines += [f"## {category}", ""]
        lines += _check_entry(spec)
    from drills.checks.areas.wayback import WAYBACK

    lines += [
        "## Failback",
        "",
        "The way-back checks, run by `drills readiness --direction failback` and before a "
        "failback, of the reversed plan (the primary is the site taking over).",
        "",
    ]
    for spec in sorted(WAYBACK.all(), key=lambda s: s.id):
        lines += _check_entry(spec)
    return "\n".join(lines)


def _check_entry(spec: Any) -> list[str]:
    return [
        f"### `{spec.id}`",
        "",
        f"**{_text(spec.title)}** · category {spec.category} · time limit {spec.timeout_s:g}s",
        "",
        f"- **Reads:** {_text(spec.reads)}",
        f"- **Blocks when:** {_text(spec.blocks)}",
        f"- **Warns, or fails without blocking, when:** {_text(spec.warns)}",
        f"- **Remediation:** {_text(spec.remediation)}",
        "",
        _block(spec.doc),
        "",
    ]


def _table_page(title: str, intro: str, header: list[str], rows: Iterable[list[str]]) -> str:
    lines = [f"# {title}", "", intro, "", "| " + " | ".join(header) + " |"]
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def metrics_page() -> str:
    from drills.metrics.exporter import SPECS
    from drills.metrics.meaning import MEANING

    return _table_page(
        "Metrics",
        "Every metric that `drills metrics serve` exports, generated from its definitions: "
        "its HELP line as Prometheus shows it, then what it means in full. All are gauges. A "
        "timestamp that never happened is 0 (so a plan never drilled is long overdue, and a "
        "plan never checked has a stale readiness).",
        ["Metric", "Labels", "HELP", "Meaning"],
        (
            [
                f"`{s.name}`",
                ", ".join(f"`{label}`" for label in s.labels) or "none",
                _text(s.help),
                MEANING[s.name],
            ]
            for s in SPECS
        ),
    )


def events_page() -> str:
    from drills.notify.events import EventKind

    return _table_page(
        "Notification events",
        "Every kind of notice drills sends, generated from its definitions. Each is also "
        "emitted as a Prefect event of the name shown.",
        ["Kind", "Prefect event", "When"],
        ([f"`{k.value}`", f"`{k.event_name}`", _text(k.description)] for k in EventKind),
    )


def exit_codes_page() -> str:
    from drills.cli.common import EXIT_CODES

    return _table_page(
        "Exit codes",
        "What the exit code of every `drills` command means, generated from the CLI.",
        ["Code", "Meaning"],
        ([str(code), _text(meaning)] for code, meaning in sorted(EXIT_CODES.items())),
    )


PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_page,
    "reference/plan.md": plan_page,
    "reference/checks.md": checks_page,
    "reference/metrics.md": metrics_page,
    "reference/events.md": events_page,
    "reference/exit-codes.md": exit_codes_page,
}


def generated(config: MkDocsConfig) -> Iterable[File]:
    for uri, page in PAGES.items():
        yield File.generated(config, uri, content=page())


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for file in generated(config):
        files.append(file)
    return files
