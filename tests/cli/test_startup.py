"""The CLI starts at once: `drills --help` and `drills plan validate` load none of the heavy
libraries that other commands need. A structural guarantee, checked in a fresh interpreter,
not a timing (bench/startup.py measures that)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from drills.cli import app
from drills.cli.app import COMMANDS, load_commands

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "plans" / "gpu-platform.example.yaml"
BROKEN = ROOT / "tests" / "plan" / "plans" / "many-problems.yaml"
HEAVY = (
    "boto3", "botocore", "kubernetes", "prefect", "moto", "streamlit", "pandas", "altair",
    "sqlalchemy", "httpx",
)  # fmt: skip

# Runs the real entry point, then reports which top-level modules it had loaded.
PROBE = """
import json, os, sys
from drills.cli import main
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code or 0
with open(os.environ["LOADED_OUT"], "w") as out:
    json.dump({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules})}, out)
"""


def _loaded(tmp_path: Path, *args: str) -> tuple[int, set[str]]:
    out = tmp_path / "loaded.json"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env=os.environ | {"LOADED_OUT": str(out)},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.exists(), done.stderr
    found = json.loads(out.read_text())
    return found["code"], set(found["modules"])


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--help"], 0),
        ([], 2),  # no command: the help, as click exits for it
        (["plan", "validate", str(EXAMPLE)], 0),
        (["plan", "validate", str(BROKEN)], 2),
    ],
    ids=["help", "no-args", "validate", "validate-invalid"],
)
def test_no_heavy_library_is_imported(tmp_path: Path, args: list[str], code: int) -> None:
    exit_code, modules = _loaded(tmp_path, *args)
    assert exit_code == code
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))


def test_a_command_that_needs_them_still_gets_them(tmp_path: Path) -> None:
    """The probe can see a heavy import: `drills history` opens the history store."""
    exit_code, modules = _loaded(tmp_path, "history", "--db", f"sqlite:///{tmp_path}/h.db")
    assert exit_code == 0
    assert "sqlalchemy" in modules


def test_the_command_names_are_known_without_loading_any() -> None:
    code = (
        "import sys, typer.main\n"
        "from drills.cli import app\n"
        "names = list(typer.main.get_command(app).commands)\n"
        "print(' '.join(names))\n"
        "print(' '.join(sorted(m for m in sys.modules if m.endswith('_cmd'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    names, modules = done.stdout.split("\n")[:2]
    assert names.split() == list(COMMANDS)
    assert modules == ""


def _words(text: str | None) -> str:
    return " ".join((text or "").split())


def test_the_listed_help_is_each_commands_own() -> None:
    """The listing shows a command's first paragraph; the rest is for its own --help."""
    for name, entry in COMMANDS.items():
        command = load_commands(entry.module)[name]
        summary = (command.help or "").split("\n\n")[0]
        assert _words(summary) == _words(entry.help), name


def test_every_registered_command_is_listed() -> None:
    cli = ROOT / "drills" / "cli"
    for module in sorted(p.stem for p in cli.glob("*_cmd.py")):
        registered = set(load_commands(f"drills.cli.{module}"))
        assert registered <= set(COMMANDS), f"{module} registers {registered - set(COMMANDS)}"
        assert all(COMMANDS[name].module == f"drills.cli.{module}" for name in registered)


def test_help_lists_every_command_and_each_one_loads() -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0
    for name in COMMANDS:
        assert f" {name} " in listed.stdout
        own = runner.invoke(app, [name, "--help"], env={"COLUMNS": "200"})
        assert own.exit_code == 0, (name, own.output)
        assert _words(COMMANDS[name].help)[:40] in _words(own.stdout)


def test_an_unknown_command_is_refused() -> None:
    result = CliRunner().invoke(app, ["bogus"])
    assert result.exit_code == 2
    assert "No such command 'bogus'" in result.output
