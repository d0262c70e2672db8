"""The generated reference has an entry for every item of every registry it is made from.

Each test walks the registry itself (not the generator) and looks for each item in the built
pages, so an entry the generator leaves out, or a page it fails to write, fails here.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from typing import Any

import pytest

import drills.cli
from drills.checks.areas.wayback import WAYBACK
from drills.checks.base import CATALOGUE_FIELDS, CheckContext, CheckRegistry, Outcome, Status
from drills.checks.catalog import load_checks
from drills.cli.app import COMMANDS, load_commands
from drills.cli.common import EXIT_CODES
from drills.metrics.exporter import SPECS
from drills.notify.events import EventKind
from drills.plan import plan_schema
from tests.docs.conftest import BuiltSite, plain, text_of


def _commands() -> Iterator[tuple[str, Any]]:
    def walk(name: str, command: Any) -> Iterator[tuple[str, Any]]:
        yield name, command
        for sub_name, sub in getattr(command, "commands", {}).items():
            yield from walk(f"{name} {sub_name}", sub)

    for name, entry in COMMANDS.items():
        yield from walk(f"drills {name}", load_commands(entry.module)[name])


def test_site_builds_strict_with_every_reference_page(built_site: BuiltSite) -> None:
    for uri in ("cli", "plan", "checks", "metrics", "events", "exit-codes"):
        assert built_site.page(f"reference/{uri}.md").sections, uri


def test_every_cli_command_and_option_has_an_entry(built_site: BuiltSite) -> None:
    page = built_site.page("reference/cli.md")
    names = []
    for name, command in _commands():
        names.append(name)
        section = text_of(page.section(name))
        for param in command.params:
            if param.name == "help":
                continue
            shown = param.opts[0] if param.param_type_name == "option" else param.name.upper()
            if param.param_type_name == "argument" and param.metavar:
                shown = param.metavar.upper().strip("[]")
            assert shown in section, f"{name}: {shown} has no entry"
    assert "drills plan schema" in names and "drills evidence verify" in names


def test_every_plan_field_has_an_entry_with_its_description(built_site: BuiltSite) -> None:
    page = built_site.page("reference/plan.md")
    schema = plan_schema()
    models = {"DrillPlan": schema, **schema["$defs"]}
    fields = 0
    for model, spec in models.items():
        section = text_of(page.section(model))
        for field, field_spec in spec.get("properties", {}).items():
            fields += 1
            assert field in section, f"{model}.{field} has no entry"
            description = plain(field_spec.get("description", ""))
            assert description in section, f"{model}.{field}: its description is not shown"
    assert fields > 50


def test_every_readiness_check_has_an_entry(built_site: BuiltSite) -> None:
    page = built_site.page("reference/checks.md")
    specs = load_checks().all()
    assert len(specs) > 20
    for spec in specs:
        section = text_of(page.section(spec.id))
        assert spec.title in section and spec.category in section, spec.id
        first_line = plain(spec.doc.splitlines()[0])
        assert first_line in section, f"{spec.id}: its docstring is not shown"


def test_every_metric_says_what_it_means() -> None:
    """The reference's meaning column comes from drills.metrics.meaning: one entry a metric,
    none for a metric that is gone."""
    from drills.metrics.meaning import MEANING

    assert set(MEANING) == {spec.name for spec in SPECS}
    assert all(text.strip() for text in MEANING.values())


def test_every_metric_and_event_has_an_entry(built_site: BuiltSite) -> None:
    metrics = text_of(built_site.page("reference/metrics.md").html)
    for spec in SPECS:
        assert spec.name in metrics and plain(spec.help) in metrics, spec.name
    events = text_of(built_site.page("reference/events.md").html)
    for kind in EventKind:
        assert kind.event_name in events and plain(kind.description) in events, kind


def test_every_exit_code_a_command_uses_is_explained(built_site: BuiltSite) -> None:
    page = text_of(built_site.page("reference/exit-codes.md").html)
    used: dict[str, int] = {}
    for module in pkgutil.iter_modules(drills.cli.__path__):
        loaded = importlib.import_module(f"drills.cli.{module.name}")
        for name, value in vars(loaded).items():
            if name.startswith("EXIT_") and isinstance(value, int):
                used[f"{module.name}.{name}"] = value
    assert used, "no EXIT_ constant found: the walk is broken"
    unexplained = {name: code for name, code in used.items() if code not in EXIT_CODES}
    assert not unexplained
    for code, meaning in EXIT_CODES.items():
        assert plain(f"{code} {meaning}") in page, code


def test_every_readiness_check_shows_its_catalogue_fields(built_site: BuiltSite) -> None:
    page = built_site.page("reference/checks.md")
    for spec in load_checks().all() + WAYBACK.all():
        section = text_of(page.section(spec.id))
        for label, value in (
            ("Reads:", spec.reads),
            ("Blocks when:", spec.blocks),
            ("Warns, or fails without blocking, when:", spec.warns),
            ("Remediation:", spec.remediation),
        ):
            assert f"{label} {plain(value)}" in section, f"{spec.id}: {label} is not shown"
        assert f"time limit {spec.timeout_s:g}s" in section, spec.id


@pytest.mark.parametrize("field", CATALOGUE_FIELDS)
def test_a_check_without_a_catalogue_field_is_refused(field: str) -> None:
    texts = {name: f"Some {name}." for name in CATALOGUE_FIELDS}
    texts[field] = "  "
    registry = CheckRegistry()

    def undocumented_field(ctx: CheckContext) -> Outcome:
        """Passes: it has a docstring, so only the empty field is missing."""
        return Outcome(Status.PASS, "never run")

    decorate = registry.check(
        "test.incomplete",
        title="Incomplete",
        category="Plan",
        reads=texts["reads"],
        blocks=texts["blocks"],
        warns=texts["warns"],
        remediation=texts["remediation"],
    )
    with pytest.raises(ValueError, match=f"needs {field}"):
        decorate(undocumented_field)
    assert registry.all() == []


def test_every_registered_check_states_its_catalogue_fields() -> None:
    specs = load_checks().all() + WAYBACK.all()
    for spec in specs:
        for field in CATALOGUE_FIELDS:
            assert getattr(spec, field).strip(), f"{spec.id}: {field} is empty"
    assert {"data.caught_up", "fence.writers_stopped"} <= {s.id for s in specs}
