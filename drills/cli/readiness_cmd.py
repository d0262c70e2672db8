"""`drills readiness PLAN`: are we ready to take over?"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table
from rich.text import Text

from drills import timefmt
from drills.cli.common import (
    EXIT_FAILED,
    DbUrl,
    PlanFiles,
    StableJson,
    fleet_paths,
    load_plan_view_or_exit,
    open_history,
)
from drills.cli.console import err_console, out_console

if TYPE_CHECKING:
    from drills.checks import CheckResult, PlanReadiness, ReadinessReport
    from drills.plan import DrillPlan

console = out_console()
err = err_console()

# Keyed by Status's values (a StrEnum): the checks and the SDKs under them load only when
# the command runs.
DIRECTIONS = ("takeover", "failback")
COLOUR: dict[str, str] = {"pass": "green", "warn": "yellow", "fail": "red", "error": "magenta"}


def readiness(
    plan_path: Annotated[
        Path | None,
        typer.Argument(
            metavar="PLAN", help="The drill plan (YAML); none with --all.", show_default=False
        ),
    ] = None,
    as_json: StableJson = False,
    only: Annotated[
        list[str] | None,
        typer.Option("--only", help="Run only this check id; repeat for several."),
    ] = None,
    category: Annotated[
        list[str] | None,
        typer.Option(
            "--category",
            help="Run only checks of this category (Images, Data, Secrets, Cluster, DNS, "
            "Cadence, Forecast); repeat for several.",
        ),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="Show each check's evidence and remediation.")
    ] = False,
    direction: Annotated[
        str | None,
        typer.Option(
            "--direction",
            help="takeover: can DR take over (the plan's checks). failback: can production "
            "return from DR to the primary (the way-back checks; never stored). Default: "
            "failback while the history says the plan serves from DR, else takeover.",
        ),
    ] = None,
    store: Annotated[
        bool,
        typer.Option(
            "--store/--no-store", help="Keep the snapshot in the history store (full runs only)."
        ),
    ] = True,
    application: Annotated[
        str | None,
        typer.Option(
            "--application",
            metavar="APP",
            help="Check only what `drills run --only APP` would take over: the application's "
            "workloads, datasets and DNS records, with those no application lists (never "
            "stored as the plan's snapshot). An unknown APP exits 2.",
        ),
    ] = None,
    db: DbUrl = None,
    all_plans: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Check every plan of DRILLS_PLANS (or --plans) at once, one result per plan; "
            "a cluster, registry, bucket, DNS server or endpoint several plans share is asked "
            "once, and the snapshots are kept together at the end.",
        ),
    ] = False,
    plans: PlanFiles = None,
    concurrency: Annotated[
        int,
        typer.Option(
            "--concurrency",
            min=1,
            help="With --all: how many plans are checked at once (each runs its checks "
            "concurrently, as alone).",
        ),
    ] = 8,
) -> None:
    """Run the plan's readiness checks. Exit 0 if none fails, 1 if any fails, 2 for a bad plan.
    A check that could not read its target (unreachable, or something else answering for it,
    such as a proxy's 404) reports error, never pass."""
    from drills.checks import run_readiness, select_checks
    from drills.orchestrator import gather

    narrowed = bool(only or category)
    _refuse_mixed_arguments(plan_path, all_plans=all_plans, narrowed=narrowed, way=direction,
                            application=application)  # fmt: skip
    if all_plans:
        _readiness_all(plans, db, store=store, concurrency=concurrency, as_json=as_json)
        return
    assert plan_path is not None
    plan = load_plan_view_or_exit(plan_path, application)
    if _direction(plan, direction, db if store else None, store) == "failback":
        if narrowed:
            err.print(
                "[red]the way-back readiness runs all its checks: --only and --category do "
                "not apply (give --direction takeover for the takeover's checks)[/]"
            )
            raise typer.Exit(2)
        _way_back(plan, db, as_json=as_json, verbose=verbose)
        return
    try:
        specs = select_checks(only or (), category or ())
    except KeyError as exc:
        err.print(f"[red]{escape(str(exc.args[0]))}[/]")
        raise typer.Exit(2) from None
    if not specs:
        err.print("[red]no check matches --only/--category[/]")
        raise typer.Exit(2)
    history = open_history(db) if store else None
    with Progress(
        TextColumn("[bold]readiness[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}", markup=False),
        console=err,
        transient=True,
        disable=as_json or not err.is_terminal,
    ) as progress:
        task = progress.add_task("", total=len(specs))

        def advance(result: CheckResult) -> None:
            progress.update(task, advance=1, description=result.id)

        report = run_readiness(
            plan,
            history=history,
            only=only or (),
            categories=category or (),
            on_result=advance,
            placement=gather("cli"),
        )
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    else:
        print_report(report, verbose=verbose)
        if verbose:
            print_notifications(report)
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)


def _refuse_mixed_arguments(
    plan_path: Path | None,
    *,
    all_plans: bool,
    narrowed: bool,
    way: str | None,
    application: str | None = None,
) -> None:
    if all_plans == (plan_path is not None):
        err.print("[red]give a plan file, or --all (not both)[/]")
        raise typer.Exit(2)
    if all_plans and narrowed:
        err.print("[red]--all runs every check: --only and --category do not apply[/]")
        raise typer.Exit(2)
    if all_plans and application is not None:
        err.print("[red]--all checks every plan whole: --application applies to one plan[/]")
        raise typer.Exit(2)
    if all_plans and way is not None:
        err.print("[red]--all checks every plan's takeover: --direction applies to one plan[/]")
        raise typer.Exit(2)


def _readiness_all(
    plans: str | None, db: str | None, *, store: bool, concurrency: int, as_json: bool
) -> None:
    """Every plan at once; exit 2 if a plan file is invalid, else 1 if any plan fails."""
    from drills.checks import run_readiness_all

    paths = fleet_paths(plans)
    if not paths:
        err.print("[red]no plan file: set DRILLS_PLANS or --plans[/]")
        raise typer.Exit(2)
    history = open_history(db) if store else None

    def said(result: PlanReadiness) -> None:
        if not as_json:
            err.print(
                Text(f"{result.plan}: {_verdict(result)} ({timefmt.duration(result.seconds)})")
            )

    results = run_readiness_all(paths, history=history, concurrency=concurrency, on_plan=said)
    if as_json:
        body = {"ok": all(r.ok for r in results), "plans": [r.to_json() for r in results]}
        typer.echo(json.dumps(body, indent=2))
    else:
        _print_fleet(results)
    if any(r.invalid for r in results):
        raise typer.Exit(2)
    if not all(r.ok for r in results):
        raise typer.Exit(EXIT_FAILED)


def _verdict(result: PlanReadiness) -> str:
    from drills.checks import verdict

    return verdict(result.report) if result.report else f"not checked: {result.error}"


def _print_fleet(results: list[PlanReadiness]) -> None:
    table = Table(title=Text(f"Readiness of {len(results)} plans"))
    for column in ("plan", "verdict", "blocking", "checks", "took"):
        table.add_column(column, overflow="fold")
    for r in results:
        style = "green" if r.ok else "red"
        blocking = str(len(r.report.blocking)) if r.report else "—"
        checks = str(len(r.report.results)) if r.report else "—"
        verdict = Text(_verdict(r), style=style)
        table.add_row(Text(r.plan), verdict, blocking, checks, timefmt.duration(r.seconds))
    console.print(table)


def _direction(plan: DrillPlan, asked: str | None, db: str | None, store: bool) -> str:
    if asked is not None:
        if asked not in DIRECTIONS:
            err.print(f"[red]--direction must be takeover or failback, not {escape(asked)!r}[/]")
            raise typer.Exit(2)
        return asked
    if not store:  # --no-store opens no history, so it cannot tell where the plan serves
        return "takeover"
    from drills.store import Site, recorded_serving

    serving = recorded_serving(open_history(db), plan.name).site
    return "failback" if serving == Site.DR else "takeover"


def _way_back(plan: DrillPlan, db: str | None, *, as_json: bool, verbose: bool) -> None:
    from drills.checks import run_wayback

    report = run_wayback(plan, history=open_history(db))
    if as_json:
        typer.echo(json.dumps(report.to_json() | {"direction": "failback"}, indent=2))
    else:
        err.print("[bold]way back: can production return from DR to the primary?[/]")
        print_report(report, verbose=verbose)
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)


def print_report(report: ReadinessReport, *, verbose: bool) -> None:
    from drills.checks import by_category, verdict

    # Summaries, evidence, remediations and the plan's name are outside text: Text, never markup.
    table = Table(title=Text(f"Readiness of {report.plan}"), show_lines=verbose)
    for column in ("check", "status", "summary", "took"):
        table.add_column(column, overflow="fold")
    for category, results in by_category(report):
        table.add_row(Text(category, style="bold"), "", "", "")
        for r in results:
            status = Text(r.status.value, style=COLOUR[r.status])
            if r.blocking:
                status.append(" BLOCKING", style="bold red")
            summary = Text(r.summary)
            if verbose:
                summary.append_text(_details(r))
            table.add_row(Text(f"  {r.id}"), status, summary, timefmt.duration(r.duration_s))
    console.print(table)
    style = "green" if report.ok else ("red" if report.blocking else "yellow")
    console.print(f"[{style}]{verdict(report)}[/] — {len(report.blocking)} blocking")


def print_notifications(report: ReadinessReport) -> None:
    """What changed since the last stored snapshot, and what became of each message: waits
    for the deliveries at most as long as the process would at exit."""
    from drills.notify import EXIT_FLUSH_S

    if not report.notices:
        console.print("[dim]notifications: nothing changed since the last stored run[/]")
        return
    deliveries = report.deliveries.wait(EXIT_FLUSH_S)
    if not deliveries:
        console.print(
            f"[dim]notifications: {len(report.notices)} to send, no target "
            "(set DRILLS_NOTIFY or the plan's notify:)[/]"
        )
        return
    console.print("[bold]notifications[/]")
    for d in deliveries:
        colour = {"delivered": "green", "pending": "yellow"}.get(d.status, "red")
        console.print(f"  [{colour}]{escape(d.describe())}[/]")


def _details(r: CheckResult) -> Text:
    text = Text()
    if r.evidence:
        text.append("\n" + json.dumps(dict(r.evidence), indent=1, default=str), style="dim")
    from drills.checks import Status

    if r.remediation and r.status is not Status.PASS:
        text.append(f"\n→ {r.remediation}", style="cyan")
    return text


def register(app: typer.Typer) -> None:
    app.command("readiness")(readiness)
