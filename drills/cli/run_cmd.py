"""`drills run`: take over (a drill, a practice, an incident or a failback), and report."""

from __future__ import annotations

import contextlib
import datetime as dt
import getpass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.live import Live
from rich.text import Text

from drills.cli.common import EXIT_FAILED, DbUrl, load_plan_view_or_exit, open_history
from drills.cli.console import err_console
from drills.cli.history_cmd import echo_report
from drills.cli.live_view import LiveView
from drills.store import Mode

# The takeover and the history store (Kubernetes, boto3, SQLAlchemy under them) are imported
# by the commands that use them, so that the rest of the CLI starts at once.
if TYPE_CHECKING:
    from drills.store import HistoryStore
    from drills.takeover import (
        Approval,
        Drill,
        DrillHooks,
        DrillRequest,
        DrillResult,
        PlannedChange,
    )

err = err_console()

EXIT_REFUSED = 3
EXIT_DECLINED = 4  # the operator said no at "Proceed?": nothing changed, nothing recorded


def _confirm(planned: list[PlannedChange]) -> bool:
    err.print("[bold]The drill will make these changes:[/]")
    for change in planned:
        err.print(Text(f"  {change.describe()}"))
    return typer.confirm("Proceed?", default=False, err=True)


def _approve(request: DrillRequest) -> Approval:
    from drills.takeover import Approval, approval_question

    approver = typer.prompt("Approver", default=getpass.getuser(), err=True)
    question, effect = approval_question(request)
    approved = typer.confirm(f"{effect} {question}", err=True)
    comment = typer.prompt("Comment", default="", err=True)
    return Approval(approved, approver, comment)


def run(
    plan_path: Annotated[Path, typer.Argument(metavar="PLAN", help="The drill plan (YAML).")],
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            help="drill: fence the primary, switch the production DNS record to DR, fail "
            "back after measuring. practice: bring DR's critical tier up beside the primary "
            "(never fenced; the production record never changed), verify it through "
            "practice.record or at DR's endpoint, return DR to standby; refused (exit 3) "
            "when it would touch what the primary serves from. incident: fence, switch DNS "
            "and stay at DR. failback: bring production home from DR after an incident "
            "(only while the plan serves from DR).",
        ),
    ] = "drill",
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Run preflight and list every change as current → intended; change nothing.",
        ),
    ] = False,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Do not ask for confirmation. Without it the changes are listed and asked "
            "about before the run starts; answering no exits 4 and records nothing.",
        ),
    ] = False,
    force_unfenced: Annotated[
        bool,
        typer.Option(
            "--force-unfenced",
            help="Incident mode only: go on when the primary is unreachable and cannot be fenced. "
            "It may still be serving writes; the report says so.",
        ),
    ] = False,
    ignore_gates: Annotated[
        bool,
        typer.Option(
            "--ignore-gates",
            help="Drill or practice: go on when a gate cannot be verified (Alertmanager does "
            "not answer). Needs --reason; written to the audit log. A firing blocking alert "
            "or a blocked window still refuses (exit 3); gates never stop an incident.",
        ),
    ] = False,
    accept_blocking: Annotated[
        list[str] | None,
        typer.Option(
            "--accept-blocking",
            metavar="CHECK",
            help="Drill or practice: go on past this blocking readiness failure (a check id, "
            "such as capacity.carry; repeat for more), to see how far a DR known to be short "
            "gets. Needs --reason; written to the audit log and the report. sites.distinct "
            "and the fence proof still refuse.",
        ),
    ] = None,
    detected_at: Annotated[
        str | None,
        typer.Option(
            "--detected-at",
            metavar="TIME",
            help="Incident mode only: when the trouble was detected (ISO 8601, e.g. "
            "2026-12-02T07:55:00Z; without a zone, UTC), before you declared it. Recorded as "
            "detected_at, and detection_seconds (declaration - detection) in the report, "
            "the history and the metrics. An incident approved from an alert's proposal on "
            "the dashboard takes the alert's startsAt instead.",
        ),
    ] = None,
    operator: Annotated[
        str | None, typer.Option("--operator", help="Who runs it (default: the login name).")
    ] = None,
    reason: Annotated[
        str, typer.Option("--reason", help="Why: recorded in the history and report.")
    ] = "",
    tier_deadline: Annotated[
        float,
        typer.Option(
            "--tier-deadline",
            min=1.0,
            help="Seconds each tier may take to become ready. A target that fails for now "
            "(a timeout, a refusal, a 5xx) is retried until then, each wait shown; an "
            "incident past it is held as stuck and announced (incident.stuck).",
        ),
    ] = 600.0,
    sync_deadline: Annotated[
        float,
        typer.Option(
            "--sync-deadline",
            min=1.0,
            help="Failback only: seconds the final sync may take, until every DR write is "
            "readable at the primary.",
        ),
    ] = 300.0,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the final report as JSON.")
    ] = False,
    application: Annotated[
        str | None,
        typer.Option(
            "--only",
            metavar="APP",
            help="Take over or practise only this application of the plan (its `applications` "
            "list): its workloads, datasets and DNS records, with those no application lists. "
            "Only they are leased, so another application's run is not in the way; the "
            "primary's fence and the production record are the plan's, shared by every "
            "takeover. Drill, incident and practice (and --dry-run); a failback follows its "
            "incident's application on its own. An unknown APP exits 2.",
        ),
    ] = None,
    db: DbUrl = None,
) -> None:
    """Run a minimum-takeover drill (or a practice that leaves production untouched, a real
    incident takeover, or the failback after one) and print its report.

    Exit 0 succeeded (or dry run), 1 failed, 2 bad plan or options, 3 refused (a refused
    incident or failback is written to the audit log, as the dashboard's refusals are; a
    practice that would touch what the primary serves from; a drill or practice held back
    by the plan's gates: a blocking alert, a blocked window, an unverified gate), 4
    declined at the confirmation: nothing changed and no run recorded. If the history store
    stops answering mid-run, a drill rolls back and an incident goes on; both keep their
    journal in a local write-ahead file (DRILLS_STATE_DIR) and write it back when the store
    answers. A PostgreSQL store without durable commits is refused unless
    DRILLS_ALLOW_NONDURABLE_STORE=1."""
    _check_mode(mode, force_unfenced)
    detected = _detected_at(detected_at, mode)
    accepted = _accepted_checks(accept_blocking or [], mode, reason)
    if ignore_gates and not reason.strip():
        err.print("[red]--ignore-gates needs a --reason: it is written to the audit log[/]")
        raise typer.Exit(2)
    if application is not None and mode == Mode.FAILBACK:
        err.print("[red]--only does not apply to a failback: it follows its incident's "
                  "application on its own[/]")  # fmt: skip
        raise typer.Exit(2)
    plan = load_plan_view_or_exit(plan_path, application)
    history = open_history(db)
    title = plan.name + (f" (application {application})" if application else "")
    view = LiveView(title, mode, console=err)
    from drills.launch import drill_request

    request = drill_request(
        plan,
        plan_path,
        mode=mode,
        dry_run=dry_run,
        operator=operator or None,  # an empty --operator is the login name too
        reason=reason,
        declared_at=dt.datetime.now(dt.UTC) if mode == Mode.INCIDENT else None,
        detected_at=detected,
        force_unfenced=force_unfenced,
        tier_deadline_s=tier_deadline,
        sync_deadline_s=sync_deadline,
        ignore_gates=ignore_gates,
        accept_blocking=accepted,
    )
    hooks = _hooks(view)
    live = not as_json and err.is_terminal
    view.echo_waits = not live
    result = _execute(request, history, hooks, view, live=live, ask=not (yes or dry_run))
    _print_report(history, result, as_json=as_json)
    if not result.status.succeeded:
        raise typer.Exit(EXIT_FAILED)


def _check_mode(mode: str, force_unfenced: bool) -> None:
    if mode not in tuple(Mode):
        err.print(Text(f"--mode must be drill, practice, incident or failback, not {mode!r}",
                       style="red"))  # fmt: skip
        raise typer.Exit(2)
    if force_unfenced and mode != Mode.INCIDENT:
        err.print("[red]--force-unfenced only makes sense with --mode incident[/]")
        raise typer.Exit(2)


def _accepted_checks(ids: list[str], mode: str, reason: str) -> tuple[str, ...]:
    """--accept-blocking as known check ids, or one line of error (exit 2)."""
    if not ids:
        return ()
    from drills.checks import load_checks

    if not Mode(mode).rehearsal:
        err.print("[red]--accept-blocking belongs to a drill or a practice: an incident is "
                  "never blocked by readiness[/]")  # fmt: skip
        raise typer.Exit(2)
    if not reason.strip():
        err.print("[red]--accept-blocking needs a --reason: it is written to the audit log[/]")
        raise typer.Exit(2)
    unknown = sorted(set(ids) - {spec.id for spec in load_checks().all()})
    if unknown:
        err.print(Text(f"--accept-blocking: no check {', '.join(unknown)} (the ids "
                       "`drills readiness` prints)", style="red"))  # fmt: skip
        raise typer.Exit(2)
    return tuple(dict.fromkeys(ids))


def _detected_at(value: str | None, mode: str) -> dt.datetime | None:
    """--detected-at as a time, or one line of error (exit 2)."""
    if value is None:
        return None
    from drills.takeover import parse_moment

    if mode != Mode.INCIDENT:
        err.print("[red]--detected-at only makes sense with --mode incident[/]")
        raise typer.Exit(2)
    try:
        detected = parse_moment(value, "--detected-at")
        if detected > dt.datetime.now(dt.UTC):  # the declaration is now: detection comes first
            raise ValueError(f"--detected-at {value} is in the future")
    except ValueError as exc:
        err.print(Text(str(exc), style="red"), soft_wrap=True)
        raise typer.Exit(2) from None
    return detected


def _hooks(view: LiveView) -> DrillHooks:
    from drills.takeover import DrillHooks, crashpoint, crashpoints_wanted

    return DrillHooks(
        approve=_approve,
        listener=view.on_event,
        # Only the crash tests set DRILLS_CRASH_AT; otherwise no hook at all.
        crash_point=crashpoint if crashpoints_wanted() else None,
    )


def _execute(
    request: DrillRequest,
    history: HistoryStore,
    hooks: DrillHooks,
    view: LiveView,
    *,
    live: bool,
    ask: bool,
) -> DrillResult:
    """Run the drill with the live view; returns its result. With ``ask``, the changes are
    confirmed before the run starts, so a "no" leaves no run in the history."""
    from drills.errors import RunRefused
    from drills.launch import takeover
    from drills.store import is_store_outage, outage_text
    from drills.takeover import LeaseHeldError, UnfinishedRunError, cancel_on_signals

    drill = takeover(request, history, hooks)
    try:
        if ask:
            _ask_first(drill)
        # Ctrl-C or SIGTERM: the drill rolls back (incident: stops and reports), then exits.
        with (
            cancel_on_signals(),
            Live(view, console=err, refresh_per_second=8) if live else contextlib.nullcontext(),
        ):
            result = drill.run()
    # RunRefused: a failback while the plan is not at DR, a takeover while it is.
    except (LeaseHeldError, UnfinishedRunError, RunRefused) as exc:
        # One line, however narrow the terminal: a log keeps it whole.
        err.print(Text(f"refused: {exc}", style="bold red"), soft_wrap=True)
        _audit_refusal(request, history, f"refused: {exc}")
        raise typer.Exit(EXIT_REFUSED) from None
    except Exception as exc:  # before the first change: nothing to undo, one line
        if not is_store_outage(exc):
            raise
        err.print(Text(f"refused: the history store does not answer ({outage_text(exc)})",
                       style="bold red"))  # fmt: skip
        raise typer.Exit(EXIT_REFUSED) from None
    return result


def _ask_first(drill: Drill) -> None:
    """The changes, confirmed before the run starts: a "no" exits 4 with nothing recorded.
    When they cannot be read beforehand (a site unreachable), the run asks as it goes, after
    its preflight, as it always did; a "no" there is recorded as an aborted run."""
    from drills.errors import DrillError, RunRefused

    try:
        planned = drill.preview()
    except RunRefused:
        raise
    except DrillError as exc:
        err.print(Text(f"the changes cannot be listed before the run ({exc}); asking after "
                       "its preflight", style="yellow"))  # fmt: skip
        drill.hooks.confirm = _confirm
        return
    if not _confirm(planned):
        err.print("declined: nothing was changed and no run was recorded")
        raise typer.Exit(EXIT_DECLINED)


def _audit_refusal(request: DrillRequest, history: HistoryStore, why: str) -> None:
    """A refused incident or failback is audited as the dashboard's refusals are: the same
    action, who, plan and reason, and the refusal as its outcome (a drill is not audited:
    it changes nothing that stays)."""
    from drills.takeover import DECLARE_ACTION, FAILBACK_ACTION, Declaration, audit_decision

    action = {Mode.INCIDENT: DECLARE_ACTION, Mode.FAILBACK: FAILBACK_ACTION}.get(request.mode)
    if action is None or request.dry_run:
        return
    detail: dict[str, Any] = {"source": "cli", "plan_path": request.plan_path}
    if request.mode == Mode.INCIDENT:
        detail["force_unfenced"] = request.force_unfenced
        if request.declared_at is not None:
            detail["declared_at"] = request.declared_at.isoformat()
    audit_decision(history, action, request.operator, request.plan.name, request.reason,
                   Declaration(False, why), detail)  # fmt: skip


def _print_report(history: HistoryStore, result: DrillResult, *, as_json: bool) -> None:
    from drills.store import is_store_outage

    try:
        stored = history.get_run(result.run_id)
    except Exception as exc:
        if not is_store_outage(exc):
            raise
        # The run ended and said so in result.error; its report lives in the store.
        err.print(Text(f"run {result.run_id} ended {result.status}: {result.error}",
                       style="bold red"))  # fmt: skip
        raise typer.Exit(EXIT_FAILED) from None
    assert stored is not None
    echo_report(history, stored, fmt="json" if as_json else "auto")


def register(app: typer.Typer) -> None:
    app.command("run")(run)
