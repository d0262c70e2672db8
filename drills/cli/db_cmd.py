"""`drills db prune`: keep the history store from growing without bound."""

from __future__ import annotations

import datetime as dt
import json
from typing import Annotated

import typer
from rich.text import Text

from drills.cli.common import EXIT_INVALID, DbUrl, open_history
from drills.cli.console import err_console, out_console

db_app = typer.Typer(help="Maintain the history store.", no_args_is_help=True)
err = err_console()


def _age(value: str) -> dt.timedelta:
    from drills.plan.durations import parse_duration

    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        err.print(Text(f"✗ --older-than {value!r}: {exc}"))
        raise typer.Exit(EXIT_INVALID) from None
    if seconds < 86_400:
        err.print(Text(f"✗ --older-than {value!r}: at least 1d (keep today's results)"))
        raise typer.Exit(EXIT_INVALID)
    return dt.timedelta(seconds=seconds)


@db_app.command("prune")
def prune(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            help="Thin out readiness results older than this duration, 1d at least, e.g. 180d.",
        ),
    ] = "180d",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be removed; remove nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    db: DbUrl = None,
) -> None:
    """Remove readiness results older than --older-than, keeping every status change, one
    result per check per day and each plan's newest. Runs, journals, audit entries and
    evidence are never removed; the evidence chain records each prune, so `drills evidence
    verify --db` still passes."""
    from drills.store.prune import prune_readiness

    age = _age(older_than)
    result = prune_readiness(open_history(db), age, dry_run=dry_run)
    if as_json:
        typer.echo(json.dumps(result.to_json()))
        return
    verb = "would remove" if dry_run else "removed"
    out_console(highlight=False, soft_wrap=True).print(
        Text(
            f"{'(dry run) ' if dry_run else ''}{verb} {result.total_removed} of "
            f"{result.examined} readiness results older than "
            f"{result.cutoff.isoformat(timespec='seconds')}; kept "
            f"{result.examined - result.total_removed} (status changes, one per check per day, "
            "each plan's newest)"
        )
    )


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
