"""`drills providers list`: the object stores, registries, secret stores and DNS providers
installed here, from the ``drills.providers`` entry points."""

from __future__ import annotations

import json

import typer
from rich.table import Table
from rich.text import Text

from drills.cli.common import EXIT_FAILED, StableJson
from drills.cli.console import out_console

providers_app = typer.Typer(
    name="providers",
    help="The providers installed here: object stores, registries, secret stores, DNS.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add the `providers` group to ``app``; a second call does nothing."""
    if any(group.typer_instance is providers_app for group in app.registered_groups):
        return
    app.add_typer(providers_app, name="providers")


@providers_app.command("list")
def list_providers(as_json: StableJson = False) -> None:
    """List every provider of the drills.providers entry points: its name (what a plan
    selects it by), its kind (objects, registry, secrets or dns), the package and version
    it comes from, and what it supports: switch, confirm and undo (a DNS provider in a
    takeover), readiness, and which checks read through it.

    A provider that fails to load is listed with its error, and the command then exits 1.
    --json prints one object whose "providers" list gives each one's name, kind, package,
    version, entry_point, summary, supports and checks, or its error.
    """
    from drills.targets import installed

    found = installed()
    if as_json:
        typer.echo(json.dumps({"providers": [i.to_json() for i in found]}, indent=2))
    else:
        table = Table(title="Providers (drills.providers entry points)")
        for column in ("name", "kind", "package", "supports", "checks"):
            table.add_column(column)
        for i in found:
            package = f"{i.package} {i.version}"
            if i.provider is None:
                failed = Text(f"failed to load: {i.error}", style="red")
                table.add_row(i.name, "?", package, failed, "")
                continue
            p = i.provider
            table.add_row(i.name, p.kind, package, ", ".join(p.supports()), ", ".join(p.checks))
        out_console(soft_wrap=False).print(table)
    if any(i.provider is None for i in found):
        raise typer.Exit(EXIT_FAILED)
