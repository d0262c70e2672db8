"""`drills serve`: a local Prefect server with the drills deployments and a worker.

drills serve                 start it all (idempotent), print where it runs
drills serve status          what runs, whether it answers, the deployments
drills serve stop [--force]  stop the worker and the server (the one way to stop)
drills serve run NAME        start a deployment's flow run, follow it, print the report
                             (in serve_run, which adds itself to this group)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from drills import apps, timefmt
from drills.cli.common import EXIT_FAILED, exit_not_running
from drills.cli.serve_group import StateDir, console, err, fail, serve_app
from drills.errors import LabError
from drills.orchestrator import (
    INCIDENT_DEPLOYMENT,
    SERVE_STATE_DIR,
    WORK_POOL,
    WORKER_NAME,
    PrefectRest,
    ServeInfo,
    ensure_receiver,
    receiver_running,
    redacted_url,
    serve_down,
    serve_running,
    serve_up,
    warm_running,
)


def _print_started(info: ServeInfo, already: bool) -> None:
    if already:
        console.print(f"Already running (server pid {info.server_pid}, worker {info.worker_pid}).")
    else:
        console.print(f"[green]Prefect is up[/] in {timefmt.duration(info.startup_seconds)}.")
    table = Table(show_header=False)
    table.add_row("UI", info.ui_url)
    table.add_row("API", info.api_url)
    table.add_row("work pool", f"{WORK_POOL} (worker {WORKER_NAME}, pid {info.worker_pid})")
    table.add_row("warm runner", f"{INCIDENT_DEPLOYMENT} (pid {info.warm_pid})")
    if receiver_running(info):
        table.add_row("alert receiver", f"{info.receiver_url} (pid {info.receiver_pid})")
    table.add_row("project", info.project_dir)
    table.add_row("history store", redacted_url(info.db_url))
    table.add_row("logs", ", ".join(str(p) for p in info.logs.values()))
    console.print(table)
    console.print(
        "Run the drill now:        drills serve run quarterly-drill\n"
        f"Use the prefect CLI here: export PREFECT_API_URL={info.api_url}\n"
        "Stop it all:              drills serve stop\n" + _own_server_hint(Path(info.project_dir)),
        highlight=False,
        soft_wrap=True,
    )


def _own_server_hint(project: Path) -> str:
    """How to deploy to a Prefect server of one's own. An installed drills keeps prefect.yaml
    and the flows in its package, so the commands name where."""
    root = apps.apps_root()
    pythonpath = "" if root == project else f"PYTHONPATH={root} "
    prefect_file = apps.prefect_file(project)
    shipped = "" if prefect_file.parent == project else f" --prefect-file {prefect_file}"
    return (
        "An existing Prefect server instead: set PREFECT_API_URL to it (and PREFECT_API_KEY\n"
        f"if it needs one), then `{pythonpath}prefect --no-prompt deploy --all{shipped}` and\n"
        f"`DRILLS_PROJECT_DIR=$PWD {pythonpath}prefect worker start --pool {WORK_POOL}` "
        "here; the\ndashboard and `drills serve run` follow PREFECT_API_URL when no local server "
        "runs. Give quarterly-drill\nits plan's schedule yourself there: `prefect deployment "
        "schedule create\nminimum-takeover-drill/quarterly-drill --cron CRON --timezone ZONE`."
    )


@serve_app.callback(invoke_without_command=True)
def start(
    ctx: typer.Context,
    port: Annotated[
        int | None,
        typer.Option("--port", min=1, max=65535, help="Port of the server (default 4200 if free)."),
    ] = None,
    project_dir: Annotated[
        Path,
        typer.Option("--project-dir", help="The directory of prefect.yaml; flows run from it."),
    ] = Path("."),
    timeout: Annotated[
        float, typer.Option("--timeout", min=5.0, help="Seconds to wait for it all to start.")
    ] = 300.0,
    database: Annotated[
        str | None,
        typer.Option(
            "--database",
            envvar="PREFECT_API_DATABASE_CONNECTION_URL",
            help="The Prefect server's own database, e.g. postgresql://user@host/prefect "
            "(the driver becomes asyncpg); default SQLite in the state directory. This is "
            "Prefect's setting PREFECT_API_DATABASE_CONNECTION_URL, not the history store.",
            show_default=False,
        ),
    ] = None,
    receiver_token: Annotated[
        str | None,
        typer.Option(
            "--receiver-token",
            envvar="DRILLS_RECEIVER_TOKEN_REF",
            help="Start the Alertmanager webhook receiver too (`drills serve receiver`), "
            "with the bearer token Alertmanager must send, by reference: env:NAME, "
            "file:PATH or prefect:BLOCK. Without it no receiver runs.",
            show_default=False,
        ),
    ] = None,
    receiver_port: Annotated[
        int | None,
        typer.Option(
            "--receiver-port", min=1, max=65535, help="Port of the receiver (default 9095 if free)."
        ),
    ] = None,
    state_dir: StateDir = SERVE_STATE_DIR,
) -> None:
    """Start a local Prefect server, deploy the drills flows and start a worker, and a warm
    runner that starts declared incidents at once (idempotent). The scheduled drill
    (quarterly-drill) gets the schedule of its plan's `schedule:`, the one place it is
    written: edit the plan, then run this again. With --receiver-token, the Alertmanager
    webhook receiver too: an alert matching a plan's declare_on proposes an incident on the
    dashboard's Incident page, started only when an operator approves it. `drills serve
    stop` stops it all."""
    if ctx.invoked_subcommand is not None:
        return
    if receiver_token is not None:  # an unreadable token stops the start before anything runs
        from drills.cli.serve_receiver import check_token_before_start

        check_token_before_start(receiver_token, "--receiver-token")
    fresh = serve_running(state_dir) is None
    if fresh:
        err.print("Starting the Prefect server, deployments and worker (about 30 s)…")
    try:
        info, already = serve_up(
            state_dir,
            project_dir=project_dir,
            port=port,
            timeout=timeout,
            database=database,
            progress=lambda line: err.print(Text(f"  {line}")),
        )
        started = info.receiver_pid
        try:
            info = ensure_receiver(info, receiver_token, receiver_port)
        except (ValueError, LabError):
            if fresh:  # the server this command started stops with it: a failure leaves nothing
                serve_down(state_dir)
            raise
        already = already and info.receiver_pid == started
    except ValueError as exc:  # the token is not a reference; the message holds no value
        raise fail(f"--receiver-token: {exc}", 2) from None
    except LabError as exc:
        raise fail(f"drills serve failed: {exc}") from None
    _print_started(info, already)


@serve_app.command("stop")
def stop(
    state_dir: StateDir = SERVE_STATE_DIR,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Stop even while a flow run is running or paused. A drill cancels (rolls "
            "back), or, killed before it can, is left unfinished for `drills recover`.",
        ),
    ] = False,
) -> None:
    """Stop the worker (and any flow run it started), then the server."""
    info = serve_running(state_dir)
    if info is not None and not force:
        _refuse_while_active(info)
    try:
        stopped = serve_down(state_dir)
    except LabError as exc:
        raise fail(f"drills serve stop: {exc}") from None
    if stopped:
        console.print("Prefect worker and server stopped.")
    else:
        console.print(f"No local Prefect server runs from {state_dir}.")


def _refuse_while_active(info: ServeInfo) -> None:
    """A drill killed mid-takeover leaves the primary fenced until `drills recover`."""
    with PrefectRest(info.api_url) as api:
        if not api.healthy():
            return
        active = api.active_flow_runs()
    if active:
        names = ", ".join(f"{r.name} ({r.state_name})" for r in active)
        raise fail(
            f"flow runs are still active: {names}. Stopping now would interrupt them "
            "(a drill mid-takeover needs `drills recover`). Wait, or use --force."
        )


@serve_app.command("status")
def status(
    state_dir: StateDir = SERVE_STATE_DIR,
    as_json: Annotated[bool, typer.Option("--json", help="Print the state as JSON.")] = False,
) -> None:
    """Show what runs, whether it answers, and the deployments. Exit 1 if it is down."""
    info = serve_running(state_dir)
    if info is None:
        exit_not_running(
            as_json, f"No local Prefect server runs from {state_dir}; start it: drills serve"
        )
    with PrefectRest(info.api_url) as api:
        healthy = api.healthy()
        workers = api.workers(WORK_POOL) if healthy else []
        deployments = api.deployments() if healthy else []
    if as_json:
        payload: dict[str, Any] = {
            "running": True,
            "healthy": healthy,
            **{k: v for k, v in info.__dict__.items()},
            "db_url": redacted_url(info.db_url),
            "warm_running": warm_running(info),
            "receiver_running": receiver_running(info),
            "workers": [w.__dict__ for w in workers],
            "deployments": [{**d.__dict__, "schedules": list(d.schedules)} for d in deployments],
        }
        typer.echo(json.dumps(payload, indent=2))
        return
    console.print(
        Text(
            f"Server {info.ui_url} (pid {info.server_pid}): "
            + ("healthy" if healthy else "NOT answering")
        )
    )
    for w in workers:
        console.print(
            Text(f"Worker {w.name}: {w.status} (last heartbeat {w.last_heartbeat or '—'})")
        )
    warm = "running" if warm_running(info) else "NOT running (`drills serve` restarts it)"
    console.print(f"Warm runner of {INCIDENT_DEPLOYMENT} (pid {info.warm_pid}): {warm}")
    if info.receiver_pid is not None:
        state = "running" if receiver_running(info) else "NOT running"
        console.print(
            Text(f"Alert receiver {info.receiver_url} (pid {info.receiver_pid}): {state}")
        )
    table = Table(title="Deployments")
    for column in ("deployment", "flow", "schedule", "plan"):
        table.add_column(column)
    for d in deployments:
        schedule = "; ".join(d.schedules) or "none: started by a person"
        # Names, schedules and the plan come from the server: Text, so " [paused]" and any
        # bracket in them are shown as written, not read as markup.
        cells = (d.name, d.flow_name, schedule + (" [paused]" if d.paused else ""))
        table.add_row(*(Text(c) for c in cells), Text(str(d.parameters.get("plan", ""))))
    console.print(table)
    if not healthy:
        raise typer.Exit(EXIT_FAILED)


def register(app: typer.Typer) -> None:
    # `drills serve run` (serve_run) and `drills serve receiver` (serve_receiver) add
    # themselves to the group when their modules are imported.
    import drills.cli.serve_receiver
    import drills.cli.serve_run  # noqa: F401

    app.add_typer(serve_app, name="serve")
