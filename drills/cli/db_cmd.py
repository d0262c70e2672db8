"""`drills db`: the history store itself: its schema version, upgrades, and pruning."""

from __future__ import annotations

import datetime as dt
import json
from typing import Annotated

import typer
from rich.text import Text

from drills.cli.common import EXIT_INVALID, DbUrl, open_history, store_guard
from drills.cli.console import err_console, out_console

db_app = typer.Typer(
    name="db",
    help=("The history store: its schema (current), migrations (upgrade) and pruning (prune)."),
    no_args_is_help=True,
)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
err = err_console()


def register(app: typer.Typer) -> None:
    """Add the `db` group to ``app``; a second call does nothing."""
    if any(group.typer_instance is db_app for group in app.registered_groups):
        return
    app.add_typer(db_app, name="db")


@db_app.command("upgrade")
def upgrade(db: DbUrl = None, as_json: JsonFlag = False) -> None:
    """Bring the history store to this drills' schema (Alembic migrations); every run is kept.
    A store already there is left as it is, so running it again is safe. A store written by
    drills 0.1.0 (before migrations) is adopted first. A store that never had an evidence
    chain gets one here, and only here: its records are sealed as pre-chain. A store whose
    chain was removed is not sealed again: it is reported as tampered with (exit 1)."""
    from drills.store import database_url, make_engine, schema_state, schema_upgrade, store_errors

    url = db or database_url()
    with store_guard(), store_errors(url):
        engine = make_engine(url)
        try:
            was_empty = schema_state(engine).empty
            before, after = schema_upgrade(engine)
        finally:
            engine.dispose()
    # A store that had no chain got it above; one whose chain was removed is reported.
    open_history(db).close()
    if as_json:
        typer.echo(json.dumps({"before": before, "after": after, "changed": before != after}))
        return
    if before == after:
        line = f"✓ history store already at schema {after}"
    elif was_empty:
        line = f"✓ history store created at schema {after}"
    else:
        line = f"✓ history store upgraded from schema {before or 'of drills 0.1.0'} to {after}"
    out_console().print(Text(line, style="green"))


@db_app.command("current")
def current(db: DbUrl = None, as_json: JsonFlag = False) -> None:
    """Show the history store's schema version and the one this drills needs. Exit 0 when
    they match, 1 when `drills db upgrade` is due. Changes nothing."""
    from drills.store import database_url, make_engine, schema_state, store_errors

    url = db or database_url()
    with store_guard(), store_errors(url):
        engine = make_engine(url)
        try:
            found = schema_state(engine)
        finally:
            engine.dispose()
    if as_json:
        typer.echo(json.dumps(found.to_json()))
    elif found.at_head:
        out_console().print(Text(f"{found.current} (head) — {found.url}", style="green"))
    else:
        if found.empty:
            line = f"none: an empty store, made at {found.head} on first use — {found.url}"
        else:
            have = found.current or "drills 0.1.0"
            line = f"{have}; head is {found.head}: run `drills db upgrade` — {found.url}"
        out_console().print(Text(line))
    if not found.at_head:
        raise typer.Exit(1)


def _age(value: str) -> dt.timedelta:
    from drills.plan import parse_duration

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
    as_json: JsonFlag = False,
    db: DbUrl = None,
) -> None:
    """Remove readiness results older than --older-than, keeping every status change, one
    result per check per day and each plan's newest. Runs, journals, audit entries and
    evidence are never removed; the evidence chain records each prune, so `drills evidence
    verify --db` still passes."""
    from drills.store import prune_readiness

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
