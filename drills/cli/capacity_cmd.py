"""`drills capacity PLAN`: what the DR pool costs, how idle it is, and its right size."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from drills.cli.common import EXIT_FAILED, EXIT_INVALID, PlanPath, StableJson, load_plan_or_exit
from drills.cli.console import err_console, out_console

if TYPE_CHECKING:
    from drills.capacity import CapacityReport

console = out_console()

HELP = (
    "Right-size the plan's DR pool, as of now: its GPUs by model (allocatable, reserved for "
    "the standbys, used by the sentinel and by low-priority work, idle), the GPUs a takeover "
    "needs, the standby's cost a month (730 h), the idle ratio over --window (DCGM in "
    "Prometheus, else allocation, and it says which), effective compute and a recommendation."
    " Exit 1 when the cost is unknown (a GPU node unpriced, no pricing file), when DR "
    "cannot give a takeover what it needs, or when DR cannot be read; 2 for a bad plan, "
    "pricing file or option."
)


def _fail(message: str, code: int) -> typer.Exit:
    err_console(highlight=False, soft_wrap=True).print(Text(f"✗ {message}", style="bold red"))
    return typer.Exit(code)


def capacity(
    plan_path: PlanPath,
    as_json: StableJson = False,
    window: Annotated[
        str,
        typer.Option(
            "--window",
            metavar="DURATION",
            help="How far back the idle ratio looks, such as 7d, 24h or 30m (Prometheus only).",
        ),
    ] = "7d",
    pricing: Annotated[
        str | None,
        typer.Option(
            "--pricing",
            envvar="DRILLS_PRICING",
            metavar="FILE",
            help="A pricing file (OpenCost's custom-pricing JSON); default the plan's "
            "cost.pricing.",
            show_default=False,
        ),
    ] = None,
    prometheus: Annotated[
        str | None,
        typer.Option(
            "--prometheus",
            envvar="DRILLS_PROMETHEUS_URL",
            metavar="URL",
            help="The Prometheus with DR's DCGM_FI_DEV_GPU_UTIL; default the plan's "
            "cost.prometheus.",
            show_default=False,
        ),
    ] = None,
) -> None:
    from drills.capacity import PricingError, build_report, gather_capacity, pricing_for
    from drills.errors import TargetError
    from drills.plan import check_http_url, parse_duration
    from drills.targets import Targets, prometheus_for

    try:
        window_s = parse_duration(window)
    except ValueError as exc:
        raise _fail(f"--window {window!r}: {exc}", EXIT_INVALID) from None
    if window_s < 1:
        raise _fail("--window must be at least 1s", EXIT_INVALID)
    plan = load_plan_or_exit(Path(plan_path))
    try:
        prices, pricing_note = pricing_for(plan, pricing)
        url = prometheus_for(plan, prometheus)
        if url is not None:
            check_http_url(url)
    except PricingError as exc:
        raise _fail(str(exc), EXIT_INVALID) from None
    except ValueError as exc:
        raise _fail(f"--prometheus: {exc}", EXIT_INVALID) from None
    try:
        with Targets(plan) as targets:
            inputs = gather_capacity(plan, targets, pricing=prices, pricing_note=pricing_note,
                            prometheus=url, window_s=window_s)  # fmt: skip
    except TargetError as exc:
        raise _fail(f"DR could not be read: {exc}", EXIT_FAILED) from None
    report = build_report(inputs)
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    else:
        print_report(report, window)
    if report.unpriced_nodes or report.cost_per_month is None or report.missing_gpus:
        raise typer.Exit(EXIT_FAILED)


def _money(report: CapacityReport, value: object) -> str:
    return "—" if value is None else f"{report.currency} {value:,.2f}"


def print_report(report: CapacityReport, window: str) -> None:
    style = "red" if report.missing_gpus else "green"
    console.print(
        Text(f"{report.inputs.plan}: {report.recommendation_text}", style=f"bold {style}")
    )
    pool = Table(title="GPUs at DR", title_justify="left")
    for column in ("model", "nodes", "allocatable", "reserved", "standby", "sentinel",
                   "low-priority", "idle"):  # fmt: skip
        pool.add_column(column, justify="left" if column == "model" else "right")
    for row in report.by_model():
        pool.add_row(row["model"], *(str(row[k]) for k in ("nodes", "allocatable", "reserved",
                     "standby", "sentinel", "low_priority", "idle")))  # fmt: skip
    console.print(pool)
    needs = report.inputs.needs
    facts = Table(show_header=False, box=None)
    tiers = ", ".join(f"{t} {n}" for t, n in needs.by_tier.items())
    facts.add_row("needed at minimum", f"{needs.minimum} GPUs ({tiers})")
    target = "—" if needs.target is None else f"{needs.target} GPUs"
    facts.add_row("needed for the target", f"{target}: {needs.target_note}")
    facts.add_row("standby cost a month", f"{_money(report, report.cost_per_month)} (730 h)")
    if report.unpriced_nodes:
        facts.add_row(Text("unpriced GPU nodes", style="red"),
                      Text(", ".join(report.unpriced_nodes), style="red"))  # fmt: skip
    if report.inputs.pricing_note:
        facts.add_row("pricing", report.inputs.pricing_note)
    facts.add_row(
        "idle ratio",
        f"{report.idle_ratio:.1%} (from {report.idle_source}"
        + (f", over {window})" if report.idle_source == "prometheus" else ", now)"),
    )
    if report.idle_note:
        facts.add_row("", Text(report.idle_note, style="yellow"))
    facts.add_row(
        "effective compute",
        f"{report.effective_gpus:.1f} GPUs = {report.physical_gpus} physical × "
        f"{report.availability:.0%} available × {1 - report.idle_ratio:.0%} utilized",
    )
    facts.add_row("preemptible", f"{report.preemptible_gpus} GPUs could run preemptible work")
    if report.saving_per_month is not None and report.surplus_gpus:
        facts.add_row("saving a month", _money(report, report.saving_per_month))
    for note in report.inputs.notes:
        facts.add_row("note", note)
    console.print(facts)


def register(app: typer.Typer) -> None:
    app.command("capacity", help=HELP)(capacity)
