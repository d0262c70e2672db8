"""`drills forecast PLAN`: how long would a takeover started now take?"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from drills import timefmt
from drills.cli.common import EXIT_FAILED, DbUrl, load_plan_or_exit, open_history
from drills.cli.console import out_console

if TYPE_CHECKING:
    from drills.forecast import Forecast

console = out_console()

HELP = (
    "Forecast a takeover started now: RTO, client-visible RTO and full-capacity time, each "
    "with an interval, the phase and workload that dominate, and what it is based on. Exit 1 "
    "when it would not complete, when the whole interval is above the RTO target, or when "
    "the sites could not be read (the forecast is then unverified)."
)


def forecast(
    plan_path: Annotated[Path, typer.Argument(metavar="PLAN", help="The drill plan (YAML).")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the forecast as one JSON object.")
    ] = False,
    db: DbUrl = None,
) -> None:
    from drills.checks import check_context, plan_forecast
    from drills.targets import Targets

    plan = load_plan_or_exit(plan_path)
    history = open_history(db)
    try:
        with Targets(plan) as targets:
            result = plan_forecast(check_context(plan, targets, history))
    finally:
        history.close()
    if as_json:
        typer.echo(json.dumps({"plan": plan.name, **result.to_json()}, indent=2))
    else:
        print_forecast(result)
    if not result.verified or not result.completes or result.certainly_above:
        raise typer.Exit(EXIT_FAILED)


def _span(low: float, point: float, high: float) -> str:
    return f"about {timefmt.duration(point)} ({timefmt.duration(low)} to {timefmt.duration(high)})"


def print_forecast(f: Forecast) -> None:
    from drills.checks import headline

    style = (
        "red" if f.certainly_above or not f.completes else ("yellow" if f.above_target else "green")
    )
    if not f.verified:
        console.print(Text("UNVERIFIED: could not read the sites now", style="bold red"))
        for unread in f.state.unreadable:
            console.print(Text(f"  {unread}", style="red"))
        style = "red"
    console.print(Text(headline(f), style=f"bold {style}"))
    if not f.completes:
        console.print(Text("would not complete now: " + "; ".join(f.state.blocked_by), style="red"))
    table = Table(show_header=False, box=None)
    table.add_row("RTO", _span(f.rto.low, f.rto.point, f.rto.high))
    table.add_row(
        "client-visible RTO", _span(f.client_rto.low, f.client_rto.point, f.client_rto.high)
    )
    if f.full_capacity is not None:
        fc = f.full_capacity
        table.add_row("full capacity", _span(fc.low, fc.point, fc.high))
    table.add_row("dominant phase", f.dominant_phase or "-")
    table.add_row("dominant workload", f.dominant_workload or "-")
    table.add_row("based on", f.basis)
    for note in f.state.notes:
        table.add_row("note", note)
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("forecast", help=HELP)(forecast)
