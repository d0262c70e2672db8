"""The tutorial's commands, in the page's order, on a lab of their own: each shows what the
page says it shows. The commands and their output are read from the page's console blocks,
so the page and this test cannot drift apart."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs.conftest import ROOT
from tests.support.services import require_system_binary

PAGE = ROOT / "docs" / "tutorial.md"
_BLOCK = re.compile(r"^```console\n(.*?)^```", re.S | re.M)
_EXITS = re.compile(r"#\s*exits (\d+)")
# Table borders: what a terminal draws around a cell is not what the page promises.
_BOX = str.maketrans(dict.fromkeys("│┃┏┓┗┛━─┡┩╇┳┻┼└┘┌┐┬┴├┤╋┣┫", " "))
ELLIPSIS = "…"


@dataclass(frozen=True)
class Step:
    command: str
    exit_code: int
    expected: list[str]


def _normal(line: str) -> str:
    return " ".join(line.translate(_BOX).split())


def steps(text: str) -> list[Step]:
    found: list[Step] = []
    for block in _BLOCK.findall(text):
        for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, *output = chunk.rstrip("\n").split("\n")
            exits = _EXITS.search(command)
            expected = [_normal(line) for line in output]
            found.append(
                Step(
                    command.strip(),
                    int(exits.group(1)) if exits else 0,
                    [line for line in expected if line and line != ELLIPSIS],
                )
            )
    return found


def _pattern(line: str) -> re.Pattern[str]:
    parts = [re.escape(part.strip()) for part in line.split(ELLIPSIS)]
    return re.compile(".*".join(parts))


def missing_lines(expected: list[str], output: str) -> list[str]:
    """The expected lines not found in the output, in order (an ordered subsequence)."""
    lines = [_normal(line) for line in output.splitlines()]
    at = 0
    for i, line in enumerate(expected):
        pattern = _pattern(line)
        while at < len(lines) and not pattern.fullmatch(lines[at]):
            at += 1
        if at == len(lines):
            return expected[i:]
        at += 1
    return []


def test_the_page_matching_is_strict_about_order_and_text() -> None:
    output = "Lab up in 2.1s (pid 7).\n│ DNS │ 127.0.0.1:53 │\nLab stopped.\n"
    assert missing_lines(["Lab up in … (pid …).", "DNS 127.0.0.1:…"], output) == []
    assert missing_lines(["Lab stopped.", "Lab up in … (pid …)."], output) == [
        "Lab up in … (pid …)."
    ]
    assert missing_lines(["DNS 10.0.0.1:…"], output) == ["DNS 10.0.0.1:…"]
    parsed = steps("```console\n$ drills x   # exits 1\none\n…\n$ drills y\n```\n")
    assert parsed == [Step("drills x   # exits 1", 1, ["one"]), Step("drills y", 0, [])]


@pytest.mark.slow
def test_the_tutorial_runs_as_the_page_says(tmp_path: Path) -> None:
    require_system_binary("named", "bind9")
    require_system_binary("docker-registry", "docker-registry")
    tutorial = steps(PAGE.read_text(encoding="utf-8"))
    commands = [step.command.split()[:2] for step in tutorial]
    assert commands[0] == ["drills", "lab"] and ["drills", "run"] in commands
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DRILLS_", "PREFECT_API"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "120"
    env["PYTHONUNBUFFERED"] = "1"  # both streams in the order a terminal shows them
    try:
        for step in tutorial:
            done = subprocess.run(
                ["bash", "-c", step.command],
                cwd=tmp_path,  # the lab and the history store live here, never in the repository
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=300,
            )
            shown = done.stdout
            assert done.returncode == step.exit_code, f"$ {step.command}\n{shown}"
            missing = missing_lines(step.expected, shown)
            assert not missing, f"$ {step.command}: the page promises {missing}\n{shown}"
    finally:
        subprocess.run(
            ["drills", "lab", "down"], cwd=tmp_path, env=env, capture_output=True, timeout=60
        )
