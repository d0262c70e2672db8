"""What `drills run` shows while a run goes: on a terminal, a live table of the phases and
steps with the RTO clock; elsewhere, a line on stderr for each step as it ends and each wait."""

from __future__ import annotations

import datetime as dt
import threading
from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text

from drills import timefmt
from drills.cli.console import SafeConsole, err_console, step_line

# The takeover (Kubernetes, boto3 under it) is imported once a run starts, not with the CLI.
if TYPE_CHECKING:
    from drills.takeover import PhaseRecord, StepRecord

STATUS_STYLE = {
    "ok": "green",
    "failed": "red",
    "running": "yellow",
    "skipped": "dim",
    "planned": "cyan",
    "would": "cyan",
}


class LiveView:
    """Phases and steps as they happen, with the RTO clock ticking from T0."""

    def __init__(self, plan: str, mode: str, *, console: SafeConsole | None = None) -> None:
        self.title = f"{mode} of {plan}"
        self.err = console or err_console()
        self.phases: list[PhaseRecord] = []
        self.t0: dt.datetime | None = None
        self.lock = threading.Lock()
        from drills.takeover import every

        # Without the live table (not a terminal, --json): each step as it ends, and each
        # wait, as a line on stderr, so a pipe or a CI log follows the run as it goes.
        self.echo_waits = False
        self._due = every()

    def on_event(self, event: str, phase: PhaseRecord, step: StepRecord | None) -> None:
        with self.lock:
            if event == "phase-start":
                self.phases.append(phase)
            if step is not None and step.name == "record T0" and event == "step-end":
                self.t0 = dt.datetime.fromisoformat(step.evidence["t0"])
        if event == "step-wait" and step is not None and self.echo_waits and self._due(step):
            self.err.print(Text(f"waiting: {phase.name}: {step.waiting}", style="yellow"))
        if event == "step-end" and step is not None and self.echo_waits:
            self.err.print(Text(self.step_line(phase, step)))

    def step_line(self, phase: PhaseRecord, step: StepRecord) -> str:
        ended = step.ended_at or dt.datetime.now(dt.UTC)
        return step_line(phase.name, step.name, step.status, step.seconds, step.result, ended,
                         self.t0)  # fmt: skip

    def __rich__(self) -> Group:
        table = Table(title=self.title, expand=False)
        for column in ("phase", "step", "status", "took"):
            table.add_column(column)
        with self.lock:
            for phase in self.phases:
                style = STATUS_STYLE.get(phase.status, "")
                table.add_row(
                    f"[bold]{phase.name}[/]",
                    "",
                    f"[{style}]{phase.status}[/]",
                    timefmt.duration(phase.seconds),
                )
                for step in phase.steps:
                    style = STATUS_STYLE.get(step.status, "")
                    table.add_row(
                        "", step.name, f"[{style}]{step.status}[/]", timefmt.duration(step.seconds)
                    )
                    if step.status == "running" and step.waiting:
                        table.add_row("", Text(f"↻ {step.waiting}", style="yellow"), "", "")
            clock = ""
            if self.t0 is not None:
                since = (dt.datetime.now(dt.UTC) - self.t0).total_seconds()
                clock = f"RTO clock: {timefmt.duration(since)} since T0"
        return Group(table, Text(clock, style="bold"))
