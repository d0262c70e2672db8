"""The CLI's consoles show control characters from outside as escapes, and keep their own
colours."""

from __future__ import annotations

import io

from rich.table import Table
from rich.text import Text

from drills.cli.console import SafeConsole

HOSTILE = "\x1b[2J\x1b[Hall checks passed\u202e"


def printed(*renderables: object) -> str:
    out = io.StringIO()
    console = SafeConsole(file=out, force_terminal=True, color_system="standard", width=200)
    console.print(*renderables)
    return out.getvalue()


def test_text_and_table_cells_from_outside_are_escaped() -> None:
    table = Table("check", "summary")
    table.add_row("dns.ttl", HOSTILE)
    output = printed(Text(HOSTILE, style="red"), table, HOSTILE)
    assert "\x1b[2J" not in output and "\x1b[H" not in output and "\u202e" not in output
    assert output.count("\\x1b") >= 6  # two escapes in each of the three, shown


def test_the_consoles_own_styles_still_reach_the_terminal() -> None:
    output = printed(Text("ok", style="green"))
    assert "\x1b[32m" in output and "ok" in output


def test_newlines_stay_as_they_are() -> None:
    assert printed("a b\nc") == "a b\nc\n"
