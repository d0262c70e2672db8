"""The house's limits: Drill only sequences its phases, and no module grows past 450 lines."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("drills", "drills_lab", "ui", "flows")
MAX_MODULE_LINES = 450
MAX_DRILL_LINES = 250


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def test_the_modules_are_found() -> None:
    found = {p.relative_to(ROOT).as_posix() for p in _modules()}
    assert {"drills/takeover/drill.py", "ui/data.py", "flows/drill.py"} <= found


def test_no_module_is_over_450_lines() -> None:
    long = {
        p.relative_to(ROOT).as_posix(): n
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"split these by what they do: {long}"


def test_drill_is_only_the_sequence_of_its_phases() -> None:
    tree = ast.parse((ROOT / "drills/takeover/drill.py").read_text())
    (drill,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Drill"]
    assert drill.end_lineno is not None
    lines = drill.end_lineno - drill.lineno + 1
    assert lines < MAX_DRILL_LINES, f"Drill is {lines} lines: move what is not a phase out"
