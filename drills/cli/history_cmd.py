"""`drills history` and `drills report`: look back at past runs, and at one run's report."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from drills import timefmt
from drills.cli.common import EXIT_FAILED, DbUrl, open_history
from drills.cli.console import REPORT_FORMATS, echo_markdown, err_console, out_console
from drills.store import load_summary, slo_summary

# The history store (SQLAlchemy under it) is imported by the commands that use it, so that
# the rest of the CLI starts at once.
if TYPE_CHECKING:
    from drills.store import DrillRun, HistoryStore

console = out_console()
err = err_console()


def echo_report(history: HistoryStore, run: DrillRun, *, fmt: str) -> None:
    """The run's report with its findings as they stood when it ended: those it opened,
    saw again or closed, and those still open from earlier runs of the plan."""
    from drills.evidence import findings_markdown, findings_of_run
    from drills.store import render_markdown, report_data

    data = report_data(run, history)
    found = findings_of_run(history, run)
    if fmt == "json":
        data["findings"] = [f.to_json() for f in found]
        typer.echo(json.dumps(data, indent=2, default=str))
    else:
        document = render_markdown(data) + "\n".join(["", *findings_markdown(found), ""])
        echo_markdown(document, fmt)


def _row(run: DrillRun) -> dict[str, Any]:
    from drills.store import detection_chain_of, detection_seconds

    link = run.details.incident
    detection = run.details.detection
    failback = run.details.failback
    return {
        "id": run.id,
        "plan": run.plan,
        "application": run.details.application,
        "mode": run.mode,
        "dry_run": run.dry_run,
        "operator": run.operator,
        "started_at": run.started_at.isoformat(),
        "status": run.status,
        "verdict": run.verdict,
        "rto_seconds": run.rto_seconds,
        "client_rto_seconds": run.client_rto_seconds,
        "full_capacity_seconds": run.details.full_capacity_seconds,
        "preemption_seconds": run.preemption_seconds,
        "carry_seconds": run.carry_seconds,
        "rpo_seconds": run.rpo_seconds,
        "validation_jobs": [j.model_dump(mode="json") for j in run.details.validation_jobs],
        # The incident record: an incident names its failback, a failback its incident.
        "incident_run": link.incident_run if link else None,
        "failback_run": link.failback_run if link else None,
        "closed_at": link.closed_at.isoformat() if link and link.closed_at else None,
        "downtime_seconds": failback.downtime_seconds if failback else None,
        # An incident's detection -> declaration (the alert's startsAt or --detected-at).
        "detected_at": detection.detected_at.isoformat() if detection else None,
        "detection_seconds": detection_seconds(run),
        "detection_chain": detection_chain_of(run),  # detection → … → DR carrying
        "slo": slo_summary(run.details.slo),
        "load": load_summary(run.details.load),
    }


def _plan_cell(run: DrillRun) -> str:
    """The plan, and the application a run was restricted to (`--only`)."""
    app = run.details.application
    return f"{run.plan} ({app})" if app else run.plan


def _seconds(value: float | None) -> str:
    return timefmt.duration(value) if value is not None else ""


# The shortest id `drills history` shows: long enough to read, still far from the full one.
SHORTEST_ID = 8


def short_id(history: HistoryStore, run_id: str) -> str:
    """The shortest prefix of the id, at least SHORTEST_ID long, that `drills report` resolves to
    this run: git's way, so a narrow terminal never has to cut the one value the user copies."""
    for length in range(SHORTEST_ID, len(run_id)):
        found = history.find_run(run_id[:length])
        if found is not None and found.id == run_id:
            return run_id[:length]
    return run_id


def history_cmd(
    plan: Annotated[str | None, typer.Option("--plan", help="Only runs of this plan.")] = None,
    mode: Annotated[
        str | None,
        typer.Option("--mode", help="Only drill, practice, incident or failback runs."),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="How many runs, newest first.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of runs.")] = False,
    db: DbUrl = None,
) -> None:
    """List past drills and incidents, newest first. The id column shows each run's shortest
    unique prefix (at least 8 characters), never cut: `drills report` accepts it as it is;
    `--json` gives the full ids."""
    history = open_history(db)
    runs = history.list_runs(plan=plan, mode=mode, limit=limit)
    if as_json:
        typer.echo(json.dumps([_row(r) for r in runs], indent=2))
        return
    ids = [short_id(history, r.id) for r in runs]
    table = Table(title="Drill history")
    # The id is the value people copy into `drills report`: it keeps its width, others wrap.
    table.add_column("id", no_wrap=True, min_width=max((len(i) for i in ids), default=2))
    columns = ("plan", "mode", "started", "status", "verdict", "RTO", "client RTO",
               "full capacity")  # fmt: skip
    for column in columns:
        table.add_column(column)
    for shown, r in zip(ids, runs, strict=True):
        table.add_row(
            shown, _plan_cell(r), r.mode + (" (dry)" if r.dry_run else ""),
            timefmt.moment(r.started_at), r.status, r.verdict or "",
            _seconds(r.rto_seconds), _seconds(r.client_rto_seconds),
            _seconds(r.details.full_capacity_seconds),
        )  # fmt: skip
    console.print(table)


def report_cmd(
    run_id: Annotated[
        str, typer.Argument(metavar="RUN_ID", help="The run's id (or a unique prefix).")
    ],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="auto (rendered on a terminal, Markdown to a pipe), text (rendered), "
            "markdown (or md) or json.",
        ),
    ] = "auto",
    db: DbUrl = None,
) -> None:
    """Print a run's report: who, when, what changed, how long each phase took, objectives met,
    and the findings open or closed as it ended."""
    if fmt not in REPORT_FORMATS:
        err.print(Text(f"--format must be one of {', '.join(REPORT_FORMATS)}, not {fmt!r}",
                       style="red"))  # fmt: skip
        raise typer.Exit(2)
    history = open_history(db)
    run = history.find_run(run_id)
    if run is None:
        err.print(
            Text(
                f"no run {run_id!r} (or the prefix is ambiguous); see `drills history`", style="red"
            )
        )
        raise typer.Exit(EXIT_FAILED)
    echo_report(history, run, fmt=fmt)


def register(app: typer.Typer) -> None:
    app.command("history")(history_cmd)
    app.command("report")(report_cmd)
