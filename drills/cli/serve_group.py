"""The `drills serve` group and what its commands share: serve_cmd (start, status, stop)
and serve_run (run a deployment) both add their commands to it, and neither imports the other."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from drills.cli.common import EXIT_FAILED
from drills.cli.console import err_console, out_console

serve_app = typer.Typer(
    help="A local Prefect server, work pool, worker, the warm runner of declared incidents and "
    "the deployments of prefect.yaml.\n\nThe scheduled drill (quarterly-drill) runs on the "
    "schedule: of the plan it names, the one place that schedule is written; edit the plan, "
    "then run drills serve again.",
)
console = out_console()
err = err_console(highlight=False, soft_wrap=True)

StateDir = Annotated[
    Path,
    typer.Option(
        "--state-dir",
        envvar="DRILLS_SERVE_DIR",
        help="Where the server's PREFECT_HOME, database, logs and pids live.",
    ),
]


def fail(message: str, code: int = EXIT_FAILED) -> typer.Exit:
    err.print(Text(message, style="red"))  # outside text: exceptions, run messages
    return typer.Exit(code)
