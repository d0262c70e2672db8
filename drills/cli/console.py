"""The CLI's consoles: Rich, with every character that came from outside made visible.

A plan, a server's error or an operator's reason may hold an ESC sequence that moves
the cursor or repaints the screen, so a run could draw a verdict of its own. Rich
prints text as it is; this console escapes control characters in the text it renders
(``\\x1b``), after layout and before styling, so Rich's own colours still work.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from drills import timefmt
from drills.text import control_characters, for_terminal


class SafeConsole(Console):
    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        # Rich fixes the width from COLUMNS when the console is made, and ours are made at
        # import; unless given, it is read when printing, from COLUMNS as it is then.
        if options.get("width") is None:
            self._width = None
        if options.get("height") is None:
            self._height = None

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or not control_characters(segment.text, allow="\n\t"):
                yield segment
            else:
                yield Segment(for_terminal(segment.text, multiline=True), segment.style)


def step_line(
    phase: str,
    step: str,
    status: str,
    seconds: float,
    result: str,
    ended: dt.datetime,
    t0: dt.datetime | None,
) -> str:
    """A step as it ended, one line: ``T0+1.5 s  fence: close ingress ok (300 ms): done``."""
    when = timefmt.offset((ended - t0).total_seconds()) if t0 else timefmt.clock(ended)
    said = f": {result}" if result else ""
    return f"  {when}  {phase}: {step} {status} ({timefmt.duration(seconds)}){said}"


# How a report is printed: "auto" renders it through Rich on a terminal (headings, real
# tables, no Markdown syntax) and prints the Markdown itself to a pipe or a file.
REPORT_FORMATS = ("auto", "text", "markdown", "md", "json")


def echo_markdown(document: str, fmt: str = "auto") -> None:
    """A Markdown document on standard output, as ``fmt`` says (see REPORT_FORMATS)."""
    console = out_console()
    if fmt == "text" or (fmt == "auto" and console.is_terminal):
        from rich.markdown import Markdown

        console.print(Markdown(document))
    else:
        print(document, flush=True)


def out_console(**options: Any) -> SafeConsole:
    """Standard output."""
    return SafeConsole(**options)


def err_console(**options: Any) -> SafeConsole:
    """Standard error: messages, progress and refusals."""
    return SafeConsole(stderr=True, **options)
