"""The root Typer app. Each command group lives in its own module, imported only when one of
its commands runs: `drills --help` and `drills plan validate` then start without loading
Prefect, SQLAlchemy, boto3 or the Kubernetes client, which the other commands need.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer
import typer.main
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

if TYPE_CHECKING:
    # Typer carries its own copy of click; its groups and commands are built on these.
    from typer._click import Command, Context, HelpFormatter


@dataclass(frozen=True)
class Entry:
    module: str
    help: str


# What `drills --help` lists, without importing a command module. tests/cli/test_lazy.py
# checks that each help text is the one its module gives the command.
COMMANDS: dict[str, Entry] = {
    "readiness": Entry(
        "drills.cli.readiness_cmd",
        "Run the plan's readiness checks. Exit 0 if none fails, 1 if any fails, 2 for a bad plan. "
        "A check that could not read its target (unreachable, or something else answering for "
        "it, such as a proxy's 404) reports error, never pass.",
    ),
    "forecast": Entry(
        "drills.cli.forecast_cmd",
        "Forecast a takeover started now: RTO, client-visible RTO and full-capacity time, each "
        "with an interval, the phase and workload that dominate, and what it is based on. Exit 1 "
        "when it would not complete, when the whole interval is above the RTO target, or when "
        "the sites could not be read (the forecast is then unverified).",
    ),
    "capacity": Entry(
        "drills.cli.capacity_cmd",
        "Right-size the plan's DR pool, as of now: its GPUs by model (allocatable, reserved for "
        "the standbys, used by the sentinel and by low-priority work, idle), the GPUs a takeover "
        "needs, the standby's cost a month (730 h), the idle ratio over --window (DCGM in "
        "Prometheus, else allocation, and it says which), effective compute and a recommendation."
        " Exit 1 when the cost is unknown (a GPU node unpriced, no pricing file), when DR "
        "cannot give a takeover what it needs, or when DR cannot be read; 2 for a bad plan, "
        "pricing file or option.",
    ),
    "run": Entry(
        "drills.cli.run_cmd",
        "Run a minimum-takeover drill (or a practice that leaves production untouched, a real "
        "incident takeover, or the failback after one) and print its report.",
    ),
    "history": Entry(
        "drills.cli.history_cmd",
        "List past drills and incidents, newest first. The id column shows each run's shortest "
        "unique prefix (at least 8 characters), never cut: `drills report` accepts it as it is; "
        "`--json` gives the full ids.",
    ),
    "report": Entry(
        "drills.cli.history_cmd",
        "Print a run's report: who, when, what changed, how long each phase took, objectives met,"
        " and the findings open or closed as it ended.",
    ),
    "recover": Entry(
        "drills.cli.recover_cmd",
        "Finish the job of a run that died: a drill is rolled back and verified against the "
        "snapshot taken before it; an incident is reported, then completed (--complete), held "
        "(--hold) or, stopped before its DNS switch, abandoned (--fail-back) as the operator "
        "chooses; a failback is undone before its DNS switch and completed after it. Safe to run "
        "again.",
    ),
    "status": Entry(
        "drills.cli.status_cmd",
        "Where the plan serves from (primary, dr or in-transition), since when, the run that put "
        "it there, the open incident and the run holding the plan. Exit 4 when the live DNS or "
        "the endpoints disagree with the history, 5 when the DNS record could not be read.",
    ),
    "plan": Entry("drills.cli.plan_cmd", "Validate, inspect and describe drill plans."),
    "lab": Entry("drills.cli.lab_cmd", "The local lab: two stand-in sites on loopback."),
    "providers": Entry(
        "drills.cli.providers_cmd",
        "The providers installed here: object stores, registries, secret stores, DNS.",
    ),
    "serve": Entry(
        "drills.cli.serve_cmd",
        "A local Prefect server, work pool, worker, the warm runner of declared incidents and "
        "the deployments of prefect.yaml.",
    ),
    "metrics": Entry(
        "drills.cli.metrics_cmd",
        "Prometheus metrics: readiness, drill cadence, RTO/RPO, serving site, runs.",
    ),
    "evidence": Entry(
        "drills.cli.evidence_cmd",
        "Signed evidence packs of drills for auditors, and drill coverage per plan.",
    ),
    "db": Entry(
        "drills.cli.db_cmd",
        "The history store: its schema (current), migrations (upgrade) and pruning (prune).",
    ),
    "ui": Entry(
        "drills.cli.ui_cmd",
        "The Streamlit dashboard: readiness, drill history, declare incident, plans.",
    ),
}


def load_commands(module_name: str) -> dict[str, Command]:
    """The click commands a command module registers, by name."""
    module = importlib.import_module(module_name)
    holder = typer.Typer()
    module.register(holder)
    return dict(typer.main.get_group(holder).commands)


class LazyCommands(MutableMapping[str, "Command"]):
    """A group's commands by name: every one in COMMANDS, and any registered eagerly. Looking
    a command up imports its module; listing the names imports nothing."""

    def __init__(self, eager: Mapping[str, Command]) -> None:
        self._loaded: dict[str, Command] = dict(eager)

    def loaded(self, name: str) -> bool:
        return name in self._loaded

    def __getitem__(self, name: str) -> Command:
        if name not in self._loaded and name in COMMANDS:
            for found, command in load_commands(COMMANDS[name].module).items():
                self._loaded.setdefault(found, command)
        return self._loaded[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __contains__(self, name: object) -> bool:
        return name in COMMANDS or name in self._loaded

    def __iter__(self) -> Iterator[str]:
        return iter([*COMMANDS, *(name for name in self._loaded if name not in COMMANDS)])

    def __len__(self) -> int:
        return len(set(COMMANDS) | set(self._loaded))


class LazyGroup(TyperGroup):
    """The root group: its commands load on first use, and its help lists them all from
    COMMANDS without loading any."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(self.commands)
        self._listing = False

    def list_commands(self, ctx: Context) -> list[str]:
        return list(self.commands)  # TyperGroup's own reads every command, loading them all

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        commands = self.commands
        if self._listing and isinstance(commands, LazyCommands) and not commands.loaded(cmd_name):
            entry = COMMANDS.get(cmd_name)
            if entry is not None:
                return TyperCommand(cmd_name, help=entry.help)
        return super().get_command(ctx, cmd_name)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


# One help convention for every command, set here once: a required argument reads PLAN and an
# optional one [PLAN] (Typer 0.29 writes {PLAN}, and [[PLAN]] for a bracketed metavar), and a
# flag shows no type (Typer writes <bool> beside every one, --help included).
def _usage_name(self: TyperArgument) -> str:
    name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
    return name + ("..." if self.nargs != 1 else "")


_option_type = TyperOption.display_type_rich


def _type_unless_flag(self: TyperOption, ctx: Context) -> str | None:
    return None if self.is_flag else _option_type(self, ctx)


# A docstring's line breaks are where its source wrapped, not where the reader's terminal
# does: every paragraph after the first is reflowed as the first is (Typer 0.2x keeps them),
# except a list item's line and a paragraph marked \b, which keep their breaks.
_SOURCE_BREAK = re.compile(r"\n(?!\s*(?:[-*•]|\d+[.)])\s)")


def _reflowed(paragraphs: list[str], markup_mode: str) -> str:
    return "\n\n".join(p if p.startswith("\b") else _SOURCE_BREAK.sub(" ", p) for p in paragraphs)


TyperArgument._usage_display_name = _usage_name  # type: ignore[method-assign]
TyperOption.display_type_rich = _type_unless_flag  # type: ignore[method-assign]


def _reflowing(format_help: Any) -> Any:
    """``format_help`` with Typer's help renderer reflowing paragraphs; imported on the
    first help page drawn, not on every start (it loads Rich's layout)."""

    def format_reflowed(self: Any, ctx: Context, formatter: HelpFormatter) -> None:
        from typer import rich_utils

        rich_utils._fix_linebreaks = _reflowed
        format_help(self, ctx, formatter)

    return format_reflowed


TyperCommand.format_help = _reflowing(TyperCommand.format_help)  # type: ignore[method-assign]
TyperGroup.format_help = _reflowing(TyperGroup.format_help)  # type: ignore[method-assign]


app = typer.Typer(
    name="drills",
    cls=LazyGroup,
    help="Disaster-recovery drills for GPU/AI platforms on Kubernetes.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


def _print_version(asked: bool) -> None:
    if asked:
        from drills import __version__

        typer.echo(f"drills {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print the version of drills and exit.",
    ),
) -> None:
    # A callback makes Typer build a group even before any command is registered eagerly.
    pass
