"""The repository root holds the project's own files and nothing a shell left behind."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

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


def test_make_lets_python_write_its_bytecode_caches(tmp_path: Path) -> None:
    """Every Python process a target starts may write ``__pycache__``, whatever the caller's
    environment says: without the caches, each of the suite's processes compiles drills."""
    probe = tmp_path / "probe.mk"
    probe.write_text('probe:\n\t@echo "[$${PYTHONDONTWRITEBYTECODE-unset}]"\n')
    seen = subprocess.run(
        ["make", "-s", "-f", "Makefile", "-f", str(probe), "probe"],
        cwd=ROOT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert seen.strip() == "[unset]"
