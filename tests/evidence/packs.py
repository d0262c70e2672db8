"""Packs changed the ways an attacker (or an accident) would change them."""

from __future__ import annotations

import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from drills.cli import app
from tests.support.services import require_system_binary


def members(pack: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(pack) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def rewrite(pack: Path, out: Path, change: Callable[[dict[str, bytes]], None]) -> Path:
    """A copy of ``pack`` whose files ``change`` altered (a valid zip: CRCs recomputed)."""
    files = members(pack)
    change(files)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return out


def flip_byte(data: bytes, at: int | None = None) -> bytes:
    index = len(data) // 2 if at is None else at
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


def drills(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run `drills ARGS` in process; its exit code and all it printed."""
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250", **(env or {})})
    return result.exit_code, result.output


def pdf_text(pdf: Path) -> str:
    binary = require_system_binary("pdftotext", "poppler-utils")
    done = subprocess.run(
        [binary, "-layout", str(pdf), "-"], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout
