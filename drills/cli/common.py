"""What several commands share: exit codes, loading a plan the same way, the history store
option, and how a `status` says that nothing runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.text import Text

from drills.cli.console import err_console, out_console
from drills.errors import PlanError

if TYPE_CHECKING:
    from drills.plan import DrillPlan
    from drills.store import HistoryStore

EXIT_FAILED = 1
EXIT_INVALID = 2

# What each exit code of any command means; the docs' exit-code reference is generated from
# this, and tests/docs fails when a command module defines an EXIT_ constant not listed here.
EXIT_CODES: dict[int, str] = {
    0: "Success: the command did what it was asked, and nothing it checked failed.",
    EXIT_FAILED: "A failure found or met: a failing readiness check, a drill that failed or "
    "missed an objective, a forecast over the RTO target, an unreachable store or target, a "
    "pack that does not verify.",
    EXIT_INVALID: "Bad input, nothing done: an invalid plan, option, argument or file.",
    3: "Refused or not done yet: `drills run` and `drills recover` refuse a run nothing could "
    "prove safe; `drills recover` waits for the operator to decide (--complete, --hold, "
    "--fail-back); `drills serve run` gave up waiting for a flow run still running.",
    4: "`drills status`: the live DNS or the endpoints disagree with the history. "
    "`drills run`: declined at its confirmation; nothing was changed and no run recorded.",
    5: "`drills status`: where DNS points could not be confirmed (no authoritative server "
    "answered), so agreement is unknown.",
}

PlanPath = Annotated[Path, typer.Argument(metavar="PLAN", help="The drill plan (YAML).")]
# A command's --json that is a documented, stable interface (see its page in docs/).
StableJson = Annotated[
    bool,
    typer.Option(
        "--json", help="Print one JSON object (the stable interface described in the docs)."
    ),
]

DbUrl = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar="DRILLS_DB_URL",
        help="The history store: sqlite:///PATH or postgresql+psycopg://USER@HOST/DB (default "
        "sqlite:///.drills/history.db). One it cannot open is one line: exit 2 for a URL it "
        "cannot use, 1 for a store that does not answer.",
        show_default=False,
    ),
]

PlanFiles = Annotated[
    str | None,
    typer.Option(
        "--plans",
        envvar="DRILLS_PLANS",
        help="With --all: plan files or globs, separated by ',' (default: .lab/plan.yaml, "
        "plans/*.yaml except *.example.yaml), as the dashboard reads them.",
        show_default=False,
    ),
]


def fleet_paths(spec: str | None) -> tuple[str, ...]:
    """The plan files of the fleet: ``DRILLS_PLANS`` (or ``--plans``), else the defaults."""
    from drills.plan import default_plan_patterns, plan_paths

    return plan_paths(spec, default_plan_patterns())


def print_plan_problems(path: str | Path, exc: PlanError) -> None:
    err = err_console(highlight=False, soft_wrap=True)
    count = len(exc.problems)
    err.print(Text(f"✗ {path}: {count} problem{'s' if count != 1 else ''}", style="bold red"))
    for problem in exc.problems:
        err.print(Text(str(problem)))


def load_plan_or_exit(path: Path) -> DrillPlan:
    """Load a plan, or print every problem (no traceback) and exit 2: nothing runs on a bad plan."""
    from drills.plan import load_plan

    try:
        return with_usable_providers(load_plan(path))
    except PlanError as exc:
        print_plan_problems(path, exc)
        raise typer.Exit(EXIT_INVALID) from None


def load_plan_view_or_exit(path: Path, application: str | None) -> DrillPlan:
    """The plan, or one application's view of it (`--only`); exit 2, in one line naming the
    plan's applications, when it has no such one."""
    from drills.plan import UnknownApplicationError, only_applications

    plan = load_plan_or_exit(path)
    try:
        return only_applications(plan, application)
    except UnknownApplicationError as unknown:
        err_console().print(Text(str(unknown), style="red"), soft_wrap=True)
        raise typer.Exit(EXIT_INVALID) from None


def with_usable_providers(plan: DrillPlan) -> DrillPlan:
    """``plan``, or a PlanError naming each provider it selects that is not installed here
    or failed to load, with those that are (one line each, at the field that names it)."""
    from drills.targets import unusable

    problems = [plan.problem_at(field, line) for field, line in unusable(plan)]
    if problems:
        raise PlanError(problems)
    return plan


def open_history(url: str | None, *, read_only: bool = False) -> HistoryStore:
    """The store, its checkpoints signed with the evidence key when one is configured.
    ``read_only``: nothing is created or changed, and a store that is not there is exit 2;
    a store whose chain was removed is left for the reader (`drills evidence verify`) to
    report, where every other opener refuses it (exit 1)."""
    from drills.evidence import configured_sign
    from drills.store import HistoryStore

    with store_guard():
        sign = None if read_only else configured_sign()
        return HistoryStore(url, read_only=read_only, sign=sign)


@contextmanager
def store_guard() -> Iterator[None]:
    """A store that cannot be opened (a bad URL, a server down, an old schema) is one line
    naming `drills db upgrade` or what is wrong, and exit 2 (bad URL, schema, an unusable
    signing key) or 1 (down, or its evidence chain tampered with); never a traceback, never
    the URL's password."""
    from drills.evidence import SigningKeyError
    from drills.store import ChainTamperedError, SchemaError, StoreUnreachableError, StoreUrlError

    try:
        yield
    except (SchemaError, StoreUrlError, SigningKeyError, ChainTamperedError) as exc:
        err_console(highlight=False, soft_wrap=True).print(Text(f"✗ {exc}", style="bold red"))
        failed = isinstance(exc, StoreUnreachableError | ChainTamperedError)
        raise typer.Exit(EXIT_FAILED if failed else EXIT_INVALID) from None
    except Exception as exc:
        from drills.store import is_store_outage, outage_text

        if not is_store_outage(exc):
            raise
        why = f"✗ the history store does not answer ({outage_text(exc)})"
        err_console(highlight=False, soft_wrap=True).print(Text(why, style="bold red"))
        raise typer.Exit(EXIT_FAILED) from None


def exit_not_running(as_json: bool, message: str) -> NoReturn:
    """A `status` of something that is down: say so (``{"running": false}`` with --json), exit 1."""
    if as_json:
        typer.echo(json.dumps({"running": False}))
    else:
        out_console().print(message)
    raise typer.Exit(EXIT_FAILED)
