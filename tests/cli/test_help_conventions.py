"""Every command's --help follows one convention: a flag shows no type (no `<bool>`), a
required argument reads PLAN and an optional one [PLAN] (never `{PLAN}` or `[[PLAN]]`), and
its description flows to the terminal's width (no line breaks from the docstring's source)."""

from __future__ import annotations

import itertools
import re
from typing import Any

from typer.testing import CliRunner

from drills.cli.app import COMMANDS, app, load_commands

runner = CliRunner()
ARGUMENT = re.compile(r"^(\[[A-Z][A-Z0-9_]*\]|[A-Z][A-Z0-9_]*)(\.\.\.)?$")


def _helps(path: list[str], command: Any) -> list[tuple[str, str]]:
    out = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, (path, out.output)
    found = [(" ".join(path), out.output)]
    for name, sub in getattr(command, "commands", {}).items():
        found += _helps([*path, name], sub)
    return found


def test_every_help_page_follows_one_convention() -> None:
    root = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    pages = [("drills", root.output)]
    for name, entry in COMMANDS.items():
        pages += _helps([name], load_commands(entry.module)[name])
    assert len(pages) > len(COMMANDS)  # the groups' subcommands were walked too
    for where, text in pages:
        assert "<bool>" not in text, where
        assert "{" not in text and "[[" not in text, (where, text)
        (usage,) = [line for line in text.splitlines() if "Usage:" in line]
        arguments = usage.split("[OPTIONS]", 1)[-1].split()
        for argument in arguments:
            if argument != "COMMAND" and argument != "[ARGS]...":
                assert ARGUMENT.match(argument), (where, usage)


LIST_ITEM = re.compile(r"^\s*([-*•]|\d+[.)])\s")


def _hard_wraps(text: str, width: int) -> list[str]:
    """Lines of the description (between Usage and the first panel) that end a long way
    short of the width while the paragraph goes on: the docstring's own line breaks."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "Usage:" in line) + 1
    end = next((i for i, line in enumerate(lines) if line.lstrip().startswith("╭")), len(lines))
    body = [line.rstrip() for line in lines[start:end]]
    cut = []
    for line, after in itertools.pairwise(body):
        goes_on = after.strip() and not LIST_ITEM.match(after)
        if line.strip() and goes_on and len(line) < width * 0.75:
            cut.append(line)
    return cut


def test_no_help_page_keeps_the_docstrings_line_breaks() -> None:
    pages = []
    for name, entry in COMMANDS.items():
        pages += _helps([name], load_commands(entry.module)[name])
    wrapped = {where: cut for where, text in pages if (cut := _hard_wraps(text, 200))}
    assert not wrapped, wrapped
