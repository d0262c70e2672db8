"""The repository root holds the project's own files and nothing a shell left behind."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Every file tracked at the root, by name. A new one is a decision, made here.
ROOT_FILES = {
    ".gitignore",
    ".importlinter",
    "Makefile",
    "README.md",
    "constraints.txt",
    "mkdocs.yml",
    # The Node packages (loadtest for the load probe, Azurite for the tests); `make venv`.
    "package-lock.json",
    "package.json",
    "prefect.yaml",
    "pyproject.toml",
}


def test_only_the_projects_own_files_are_tracked_at_the_root() -> None:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    at_root = {name for name in listed if "/" not in name}
    assert at_root == ROOT_FILES, f"unexpected files at the root: {sorted(at_root ^ ROOT_FILES)}"


def test_no_placeholder_files_sit_beside_real_ones() -> None:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    placeholders = [name for name in listed if Path(name).name in {".keep", ".gitkeep"}]
    assert placeholders == []


def test_make_help_lists_every_target() -> None:
    makefile = (ROOT / "Makefile").read_text()
    phony = set()
    for line in makefile.splitlines():
        if line.startswith(".PHONY:"):
            phony.update(line.removeprefix(".PHONY:").split())
    listed = subprocess.run(
        ["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    described = {line.split()[1] for line in listed.splitlines() if line.startswith("make ")}
    assert phony - {"help"} <= described, f"missing from make help: {sorted(phony - described)}"
    assert described <= phony, f"make help names no target: {sorted(described - phony)}"


def test_version_is_the_packages() -> None:
    import tomllib

    from typer.testing import CliRunner

    from drills.cli.app import app

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"drills {declared}"


def _make_says(
    expression: str, tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> str:
    """What the Makefile's ``expression`` comes to in a recipe, with ``args`` and ``env``."""
    probe = tmp_path / "probe.mk"
    probe.write_text(f'probe:\n\t@echo "{expression}"\n')
    return subprocess.run(
        ["make", "-s", "-f", "Makefile", "-f", str(probe), "probe", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_make_lets_python_write_its_bytecode_caches(tmp_path: Path) -> None:
    """Every Python process a target starts may write ``__pycache__``, whatever the caller's
    environment says: without the caches, each of the suite's processes compiles drills."""
    seen = _make_says(
        "[$${PYTHONDONTWRITEBYTECODE-unset}]", tmp_path, env={"PYTHONDONTWRITEBYTECODE": "1"}
    )
    assert seen == "[unset]"


def test_make_makes_the_venv_from_the_system_python_when_it_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An optimised distribution build runs the suite on about 10% less CPU than a source build
    without --enable-optimizations, so it is preferred; PYTHON= still takes another."""
    monkeypatch.delenv("PYTHON", raising=False)
    system = Path("/usr/bin/python3")
    usable = (
        system.exists()
        and subprocess.run(
            [str(system), "-c", "import ensurepip, sys; assert sys.version_info >= (3, 11)"],
            capture_output=True,
        ).returncode
        == 0
    )
    assert _make_says("$(PYTHON)", tmp_path) == (str(system) if usable else "python3")
    assert _make_says("$(PYTHON)", tmp_path, "PYTHON=python3.12") == "python3.12"
