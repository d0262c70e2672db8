"""Every command's --help follows one convention: a flag shows no type (no `<bool>`), a
required argument reads PLAN and an optional one [PLAN] (never `{PLAN}` or `[[PLAN]]`)."""

from __future__ import annotations

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
