"""The lab stands beside the product (drills_lab): no command but `drills lab` loads it, and
without it `drills lab` says in one line how to install it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# The real entry point in a fresh interpreter; drills_lab is made unimportable when asked,
# as in an installation without the lab.
PROBE = """
import sys
if sys.argv[1] == "without-lab":
    sys.modules["drills_lab"] = None
sys.argv = ["drills", *sys.argv[2:]]
from drills.cli import main
try:
    main()
finally:
    print("LOADED" if any(m.split(".")[0] == "drills_lab" for m in sys.modules if sys.modules[m])
          else "NOT LOADED", file=sys.stderr)
"""


def probe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("argv", [["--help"], ["plan", "--help"], ["history", "--help"]])
def test_no_other_command_loads_the_lab(argv: list[str]) -> None:
    done = probe("with-lab", *argv)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "NOT LOADED"


def test_a_lab_command_loads_it_when_it_runs(tmp_path: Path) -> None:
    done = probe("with-lab", "lab", "status", "--state-dir", str(tmp_path))
    assert done.returncode == 1 and "No lab is running" in done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == "LOADED"


@pytest.mark.parametrize("command", ["up", "down", "status", "inventory"])
def test_without_the_lab_each_lab_command_says_how_to_install_it(command: str) -> None:
    done = probe("without-lab", "lab", command)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert lines[:-1] == [
        "✗ the lab is not installed (drills_lab is missing): pip install 'drills[lab]'"
    ]
    assert "Traceback" not in done.stderr
