"""`drills recover`: bring a run that died (or was cancelled part-way) to a known state."""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.table import Table
from rich.text import Text

from drills.cli.common import EXIT_FAILED, EXIT_INVALID, DbUrl, open_history
from drills.cli.console import err_console, out_console
from drills.errors import DrillError, RunRefused

if TYPE_CHECKING:
    from drills.takeover import Action, RecoverReport

console = out_console()
err = err_console()

EXIT_DECIDE = 3
EXIT_REFUSED = 3  # as `drills run` refuses


def _print(report: RecoverReport) -> None:
    from drills.takeover import RecoverStatus

    # Cells are Text: a target's name or state is outside text, never Rich markup.
    table = Table(title=Text(f"journal of run {report.run_id} ({report.mode} of {report.plan})"))
    for column in ("seq", "change", "target", "original", "intended", "state"):
        table.add_column(column)
    for row in report.journal:
        cells = (row["seq"], row["change"], row["target"], json.dumps(row["original"]),
                 json.dumps(row["intended"]), row["state"])  # fmt: skip
        table.add_row(*(Text(str(cell)) for cell in cells))
    console.print(table)
    state = Table(title="current state")
    state.add_column("address")
    state.add_column("state")
    for address, value in report.state.items():
        state.add_row(Text(address), Text(json.dumps(value)))
    console.print(state)
    if report.undone:
        console.print(Text(f"undone: {', '.join(report.undone)}"))
    if report.from_snapshot:
        console.print(Text(
            f"the journal was incomplete: {', '.join(report.from_snapshot)} not in it, "
            "undone from the snapshot before the run", style="yellow",
        ))  # fmt: skip
    for address, diff in report.drift.items():
        console.print(Text(f"differs from before: {address}: {diff}", style="red"))
    if report.measurement is not None:
        console.print(Text(f"completed: {report.measurement.summary()}, from the incident's T0"))
    style = "green" if report.status == RecoverStatus.RECOVERED else "bold red"
    console.print(Text(f"{report.status} ({report.action or 'report only'})", style=style))
    if report.error:
        console.print(Text(report.error, style="red"))


def recover_cmd(
    run_id: Annotated[
        str | None,
        typer.Argument(metavar="RUN_ID", help="The run to recover (id or unique prefix)."),
    ] = None,
    plan: Annotated[
        str | None,
        typer.Option("--plan", help="Recover the newest unfinished run of this plan (its name)."),
    ] = None,
    plan_file: Annotated[
        Path | None,
        typer.Option(
            "--plan-file", help="The plan file, if not where the run found it when it started."
        ),
    ] = None,
    complete: Annotated[
        bool,
        typer.Option(
            "--complete",
            help="Incident: finish the takeover (idempotent), its RTO recorded from the "
            "incident's T0. The command a stuck incident's notice names.",
        ),
    ] = False,
    hold: Annotated[
        bool,
        typer.Option("--hold", help="Incident: keep DR as it is, make sure the primary is fenced."),
    ] = False,
    fail_back: Annotated[
        bool,
        typer.Option(
            "--fail-back",
            help="Incident declared by mistake and stopped part-way before its DNS switch: "
            "undo its journal in the safe order (DNS back, DR to standby, the primary "
            "reopened) and close it. Refused (exit 3) once its DNS switch was made or a "
            "recover completed it: DR may hold writes, so --complete, then `drills run PLAN "
            "--mode failback`. Audited: needs --reason (--operator defaults to the login name).",
        ),
    ] = False,
    operator: Annotated[
        str | None, typer.Option("--operator", help="Who recovers (default: the login name).")
    ] = None,
    reason: Annotated[
        str, typer.Option("--reason", help="Why: recorded in the audit log (--fail-back).")
    ] = "",
    force_unfenced: Annotated[
        bool,
        typer.Option("--force-unfenced", help="Incident: go on if the primary is unreachable."),
    ] = False,
    deadline: Annotated[
        float, typer.Option("--deadline", min=1.0, help="Seconds each wait may take.")
    ] = 120.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
    db: DbUrl = None,
) -> None:
    """Finish the job of a run that died: a drill is rolled back and verified against the
    snapshot taken before it; an incident is reported, then completed (--complete), held
    (--hold) or, stopped before its DNS switch, abandoned (--fail-back) as the operator
    chooses; a failback is undone before its DNS switch and completed after it. Safe to run
    again.

    A change missing from the journal (lost by a store without durable commits) is undone from the
    snapshot before the run, and the output says so. What runs on this machine left in their
    write-ahead files while the store was out is written back first. Two
    at once on one run are one at a time: the second is refused (exit 3) and names the
    first, which holds the plan's lease. Exit 0 recovered, 1 recover failed, 2 bad input,
    3 refused (the plan or a target held by another live process) or an incident waiting
    for --complete or --hold."""
    # The takeover, and the SDKs under it, load only when a run is recovered.
    from drills.takeover import LeaseHeldError, RecoverStatus, pick_run, plan_of, recover_run

    if complete + hold + fail_back > 1:
        err.print("[red]choose one of --complete, --hold and --fail-back[/]")
        raise typer.Exit(EXIT_INVALID)
    action: Action | None = (
        "complete" if complete else "hold" if hold else "fail-back" if fail_back else None
    )
    plan, plan_file = _plan_option(plan, plan_file)
    history = open_history(db)
    try:
        run = pick_run(history, run_id, plan)
        report = recover_run(
            history,
            plan_of(run, plan_file),
            run,
            action=action,
            force_unfenced=force_unfenced,
            deadline_s=deadline,
            operator=operator or getpass.getuser(),
            reason=reason,
        )
    # --fail-back of an incident DR may hold writes of; a run another recover holds; the
    # plan or a target another live run holds (refused as `drills run` refuses).
    except (RunRefused, LeaseHeldError) as exc:
        err.print(Text(f"recover refused: {exc}", style="bold red"), soft_wrap=True)  # one line
        raise typer.Exit(EXIT_REFUSED) from None
    except DrillError as exc:
        err.print(Text(f"recover: {exc}", style="bold red"))
        raise typer.Exit(EXIT_FAILED) from None
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2, default=str))
    else:
        _print(report)
    if report.status == RecoverStatus.NEEDS_DECISION:
        err.print(
            Text(
                f"incident run {report.run_id} is part-way: `drills recover {report.run_id} "
                "--complete` finishes the takeover, `--hold` keeps DR as it is with the primary "
                "fenced"
            )
        )
        raise typer.Exit(EXIT_DECIDE)
    if report.status != RecoverStatus.RECOVERED:
        raise typer.Exit(EXIT_FAILED)


def _plan_option(value: str | None, plan_file: Path | None) -> tuple[str | None, Path | None]:
    """--plan as (plan name, plan file): a plan file given where a name belongs stands for
    its plan (and is the file to use); a path that is no plan file is a usage error."""
    from drills.errors import PlanError
    from drills.plan import load_plan

    # A plan's name is a label: a value with a dot or a slash can only be a path.
    if value is None or not (Path(value).is_file() or any(c in value for c in "./\\")):
        return value, plan_file
    if not Path(value).is_file():
        _plan_usage(f"{value} is not a plan name, and no such file exists")
    try:
        named = load_plan(value).name
    except PlanError as exc:
        _plan_usage(f"{value} is a file, but not a valid plan: {exc}")
    return named, plan_file or Path(value)


def _plan_usage(problem: str) -> NoReturn:
    hint = "--plan takes a plan's name, as `drills history` shows it; give a plan file with"
    err.print(Text(f"{hint} --plan-file. {problem}.", style="red"))
    raise typer.Exit(EXIT_INVALID)


def register(app: typer.Typer) -> None:
    app.command("recover")(recover_cmd)
