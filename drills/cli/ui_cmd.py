"""`drills ui`: start the dashboard; `drills ui hash-password`: make an operator password hash."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from drills.apps import AppsNotFoundError, streamlit_script
from drills.cli.common import EXIT_FAILED, DbUrl, open_history
from drills.cli.console import err_console
from drills.passwords import hash_password

ui_app = typer.Typer(
    name="ui",
    help="The Streamlit dashboard: readiness, drill history, declare incident, plans.\n\n"
    "Public read shows, and nothing more: running checks, evidence exports, declaring, "
    "failing back and cancelling need a signed-in operator (anyone with --lab), and are "
    "audited; failed sign-ins lock a name and an address out for longer each time, "
    "across sessions.",
)


def register(app: typer.Typer) -> None:
    """Add the `ui` group to ``app``; a second call does nothing."""
    if any(group.typer_instance is ui_app for group in app.registered_groups):
        return
    app.add_typer(ui_app, name="ui")


def streamlit_argv(script: Path, host: str, port: int) -> list[str]:
    return [
        sys.executable, "-m", "streamlit", "run", str(script),
        "--browser.gatherUsageStats", "false",
        "--server.headless", "true",
        "--client.toolbarMode", "viewer",  # no developer menu or Deploy button for operators
        "--runner.magicEnabled", "false",  # the pages use no magic; skip rewriting their AST
        # An operator's dashboard never reloads itself on an edit of its source: watching every
        # module it loaded costs CPU at start and after each rerun of a page.
        "--server.fileWatcherType", "none",
        "--server.address", host,
        "--server.port", str(port),
    ]  # fmt: skip


def local_prefect(env: dict[str, str]) -> str | None:
    """Point the dashboard at the Prefect server of `drills serve`, unless told otherwise.

    Its worker writes the history store it was started with, so the dashboard reads that
    one too (unless DRILLS_DB_URL says otherwise). Returns the API URL it chose.
    """
    if "PREFECT_API_URL" in env:
        return None
    from drills.orchestrator import (  # SQLAlchemy and httpx: not for `drills ui --help`
        local_history_url,
        serve_running,
    )

    info = serve_running()
    if info is None:
        return None
    env["PREFECT_API_URL"] = info.api_url
    env.setdefault("PREFECT_UI_URL", info.ui_url.rstrip("/"))
    if "DRILLS_DB_URL" not in env:  # serve.json keeps it without its password
        env["DRILLS_DB_URL"] = local_history_url(info)
    return info.api_url


@ui_app.callback(invoke_without_command=True)
def ui(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port.")] = 8501,
    lab: Annotated[
        bool,
        typer.Option(
            "--lab",
            help="Lab mode: no sign-in, anyone may declare an incident (a banner says so).",
        ),
    ] = False,
    plans: Annotated[
        str | None,
        typer.Option(
            "--plans",
            envvar="DRILLS_PLANS",
            help="Plan files or globs, separated by ',' (default: .lab/plan.yaml, plans/*.yaml).",
            show_default=False,
        ),
    ] = None,
    db: DbUrl = None,
) -> None:
    """Start the dashboard (Streamlit, usage statistics off)."""
    if ctx.invoked_subcommand is not None:
        return
    try:
        script = streamlit_script()
    except AppsNotFoundError as exc:
        err_console().print(Text(f"✗ {exc}", style="red"), soft_wrap=True)
        raise typer.Exit(EXIT_FAILED) from None
    env = dict(os.environ)
    env["STREAMLIT_BROWSER_GATHER_USAGE_STATS"] = "false"
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    if lab:
        env["DRILLS_UI_LAB"] = "1"
    if plans:
        env["DRILLS_PLANS"] = plans
    if db:
        env["DRILLS_DB_URL"] = db
    open_history(db).close()  # a store it cannot open: one line here, not a page of errors
    err = err_console(highlight=False)
    found = local_prefect(env)
    if found:
        err.print(Text(f"Prefect: the local server of `drills serve` at {found}"))
    err.print(Text(f"drills dashboard on http://{host}:{port}", style="bold"))
    # Become Streamlit: signals and the exit status are its own, with no wrapper between.
    argv = streamlit_argv(script, host, port)
    os.execve(argv[0], argv, env)


@ui_app.command("hash-password")
def hash_password_cmd(
    from_stdin: Annotated[
        bool, typer.Option("--stdin", help="Read the password from standard input (one line).")
    ] = False,
) -> None:
    """Print a hash of the operator password for DRILLS_UI_OPERATOR_PASSWORD_HASH."""
    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = typer.prompt(
            "Operator password", hide_input=True, confirmation_prompt=True, err=True
        )
    if len(password) < 12:
        err_console().print(Text("✗ use at least 12 characters", style="red"))
        raise typer.Exit(2)
    typer.echo(hash_password(password))
    err_console().print(
        Text("Set it as DRILLS_UI_OPERATOR_PASSWORD_HASH where the dashboard runs.", style="dim")
    )
