"""The CLI's consoles: Rich, with every character that came from outside made visible.

A plan, a server's error or an operator's reason may hold an ESC sequence that moves
the cursor or repaints the screen, so a run could draw a verdict of its own. Rich
prints text as it is; this console escapes control characters in the text it renders
(``\\x1b``), after layout and before styling, so Rich's own colours still work.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from drills.text import control_characters, for_terminal


class SafeConsole(Console):
    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or not control_characters(segment.text, allow="\n\t"):
                yield segment
            else:
                yield Segment(for_terminal(segment.text, multiline=True), segment.style)


def out_console(**options: Any) -> SafeConsole:
    """Standard output."""
    return SafeConsole(**options)


def err_console(**options: Any) -> SafeConsole:
    """Standard error: messages, progress and refusals."""
    return SafeConsole(stderr=True, **options)
