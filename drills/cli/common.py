"""What several commands share: loading a plan the same way, and the history store option."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from drills.errors import PlanError
from drills.history import HistoryStore
from drills.plan import DrillPlan, load_plan

EXIT_INVALID = 2

DbUrl = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar="DRILLS_DB_URL",
        help="SQLAlchemy URL of the history store (default sqlite:///.drills/history.db).",
        show_default=False,
    ),
]


def load_plan_or_exit(path: Path) -> DrillPlan:
    """Load a plan, or print every problem (no traceback) and exit 2: nothing runs on a bad plan."""
    try:
        return load_plan(path)
    except PlanError as exc:
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        count = len(exc.problems)
        err.print(Text(f"✗ {path}: {count} problem{'s' if count != 1 else ''}", style="bold red"))
        for problem in exc.problems:
            err.print(Text(str(problem)))
        raise typer.Exit(EXIT_INVALID) from None


def open_history(url: str | None) -> HistoryStore:
    return HistoryStore(url)
