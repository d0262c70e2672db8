"""`drills status PLAN`: where production is served from, and who holds the plan."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from drills.cli.common import DbUrl, PlanPath, StableJson, load_plan_or_exit, open_history
from drills.cli.console import err_console, out_console

console = out_console()
err = err_console()

EXIT_DISAGREES = 4
EXIT_UNCONFIRMED = 5
STYLE = {"primary": "green", "dr": "bold yellow", "in-transition": "bold red"}


def status_cmd(
    plan_path: PlanPath,
    as_json: StableJson = False,
    live: Annotated[
        bool,
        typer.Option(
            "--live/--no-live",
            help="Confirm the history against the live DNS record and the site endpoints.",
        ),
    ] = True,
    db: DbUrl = None,
) -> None:
    """Where the plan serves from (primary, dr or in-transition), since when, the run that put
    it there, the open incident and the run holding the plan. Exit 4 when the live DNS or the
    endpoints disagree with the history, 5 when the DNS record could not be read."""
    from drills.takeover import serving_status

    plan = load_plan_or_exit(plan_path)
    status = serving_status(plan, open_history(db), live=live)
    data = status.to_json()
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    else:
        _print(data)
    for problem, code in (
        (status.disagreement, EXIT_DISAGREES),
        (status.unconfirmed, EXIT_UNCONFIRMED),
    ):
        if problem:
            if not as_json:
                err.print(Text(f"✗ {problem}", style="bold red"))
            raise typer.Exit(code)


def _print(data: dict[str, object]) -> None:
    serving = str(data["serving"])
    table = Table(title=Text(f"{data['plan']} serves from ") + Text(serving, STYLE[serving]))
    table.add_column("")
    table.add_column("")
    rows = ("since", "run_id", "incident_id", "holding_run", "unfinished_runs")
    for key in rows:
        value = data[key]
        shown = ", ".join(value) if isinstance(value, list) else value
        table.add_row(key.replace("_", " "), Text(str(shown or "—")))
    live = data["live"]
    if isinstance(live, dict):
        values = ", ".join(live["dns_values"]) or "nothing"
        table.add_row("live DNS", Text(f"{live['dns']} ({values})"))
        for role, ok in live["endpoints"].items():
            table.add_row(f"{role} endpoint", Text("serves" if ok else "does not serve"))
        if live["error"]:
            table.add_row("live error", Text(str(live["error"]), style="red"))
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("status")(status_cmd)
