"""The leak scan's tools: find secret values in what the product wrote, and run the CLI
with everything it writes kept.

Secrets are found plain and in every base64 form, inside zips (evidence packs: each file,
inflated) and in the text of PDFs (as pdftotext reads it).

A secret can leave in its own bytes, base64-encoded as Kubernetes stores it
(standard or urlsafe alphabet, padded or not), or base64-encoded inside a larger
blob, where its alignment depends on what precedes it. For each alignment we
keep only the characters that depend on the secret alone, so a secret is found
wherever base64 of it sits. Findings name the secret and the place, never the value.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import secrets
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from drills_lab.procs import find_binary
from drills_lab.runtime import LabInfo

log = logging.getLogger("drills.tests.leak")
ROOT = Path(__file__).resolve().parents[2]
LOGGERS = ("drills", "botocore", "urllib3", "httpx", "kubernetes", "apprise")
MIN_SECRET_BYTES = 12  # shorter needles would match by chance in megabytes of logs


@dataclass(frozen=True)
class Leak:
    secret: str  # the secret's name, e.g. "tsig key"
    where: str  # a file path or a label such as "prefect artifact readiness"
    form: str  # "plain", "base64", "base64url"...

    def __str__(self) -> str:
        return f"{self.secret} ({self.form}) in {self.where}"


def needles(value: bytes) -> dict[str, bytes]:
    """Byte strings whose presence means ``value`` leaked, keyed by the form's name."""
    if len(value) < MIN_SECRET_BYTES:
        raise ValueError(f"a secret of {len(value)} bytes is too short to scan for reliably")
    found = {"plain": value}
    for shift in range(3):
        # ``shift`` unknown bytes before the secret: the first 4-char group mixes them
        # in, and the last group depends on what follows, so both are dropped.
        encoded = base64.b64encode(b"\0" * shift + value)
        core = encoded[4 if shift else 0 : (len(encoded) // 4 - 1) * 4]
        label = "base64" if shift == 0 else f"base64 (offset {shift})"
        found[label] = core
        found[label.replace("base64", "base64url")] = core.replace(b"+", b"-").replace(b"/", b"_")
    whole = base64.b64encode(value)
    found["base64 padded"] = whole
    found["base64url padded"] = base64.urlsafe_b64encode(value)
    return {form: needle for form, needle in found.items() if len(needle) >= MIN_SECRET_BYTES}


@dataclass
class SecretScanner:
    """Known secret values, and the artefacts to look for them in."""

    secrets: dict[str, str]

    def __post_init__(self) -> None:
        self._needles = {
            name: needles(value.encode("utf-8")) for name, value in self.secrets.items()
        }

    def scan_bytes(self, data: bytes, where: str) -> Iterator[Leak]:
        for name, forms in self._needles.items():
            for form, needle in forms.items():
                if needle in data:
                    yield Leak(name, where, form)
                    break  # one finding per secret and place is enough to act on

    def scan_text(self, text: str, where: str) -> Iterator[Leak]:
        yield from self.scan_bytes(text.encode("utf-8", "surrogateescape"), where)

    def scan_document(self, data: bytes, where: str) -> Iterator[Leak]:
        """The bytes, and what they hold: a zip's files (each inflated), a PDF's text."""
        yield from self.scan_bytes(data, where)
        if data.startswith(b"PK\x03\x04"):
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                for name in zf.namelist():
                    yield from self.scan_document(zf.read(name), f"{where}!{name}")
        elif data.startswith(b"%PDF-"):
            text = pdf_text(data)
            yield from self.scan_text(text, f"{where} (text)")
            # A long value may wrap across lines of the page.
            yield from self.scan_text("".join(text.split()), f"{where} (text, unwrapped)")

    def scan_files(self, paths: Iterable[Path]) -> Iterator[Leak]:
        for path in paths:
            if path.is_file():
                yield from self.scan_document(path.read_bytes(), str(path))

    def scan_tree(self, root: Path) -> Iterator[Leak]:
        yield from self.scan_files(sorted(root.rglob("*")))


def pdf_text(data: bytes) -> str:
    """A PDF's text, as pdftotext reads it; "" without pdftotext (outside CI only)."""
    binary = find_binary("pdftotext")
    if binary is None:
        if os.environ.get("CI") == "true":
            raise RuntimeError("pdftotext not installed; apt-get install poppler-utils")
        log.warning("pdftotext not installed: the text of PDFs is not scanned")
        return ""
    with tempfile.NamedTemporaryFile(suffix=".pdf") as pdf:
        pdf.write(data)
        pdf.flush()
        done = subprocess.run([binary, pdf.name, "-"], capture_output=True, timeout=60, check=True)
    return done.stdout.decode("utf-8", "replace")


def plan_variant(info: LabInfo, name: str, change: Callable[[dict[str, Any]], None]) -> Path:
    """The lab's plan, changed, written beside it so that its relative references still
    resolve; a fresh file name each time."""
    data = yaml.safe_load((Path(info.state_dir) / "plan.yaml").read_text())
    change(data)
    path = Path(info.state_dir) / f"{name}-{secrets.token_hex(4)}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# Runs `drills` commands in one process (one import, not one per command), each with
# its stdout and stderr redirected at the descriptor level to files, and DEBUG logging
# of LOGGERS into a file. A command is skipped when the CLI does not have it.
_DRIVER = f"""
import json, logging, os, sys
import typer
from drills.cli import app
log_file, spec_file, result_file = sys.argv[1:4]
handler = logging.FileHandler(log_file)
handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
logging.getLogger().addHandler(handler)
for name in {LOGGERS!r}:
    logging.getLogger(name).setLevel(logging.DEBUG)
known = set(typer.main.get_command(app).commands)
results = {{}}
saved = os.dup(1), os.dup(2)
for name, args in json.load(open(spec_file)):
    if args[0] not in known:
        continue
    with open(name + ".stdout", "wb") as out, open(name + ".stderr", "wb") as err:
        sys.stdout.flush(); sys.stderr.flush()
        os.dup2(out.fileno(), 1); os.dup2(err.fileno(), 2)
        try:
            app(args, prog_name="drills")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os.dup2(saved[0], 1); os.dup2(saved[1], 2)
    results[name] = code
json.dump(results, open(result_file, "w"))
"""


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


@dataclass
class Cli:
    """Runs batches of `drills` commands in a subprocess; keeps all output under ``out``."""

    out: Path
    env: dict[str, str]
    batches: int = 0

    def batch(self, commands: list[list[str]]) -> dict[str, Outcome]:
        """Run ``commands`` in order; returns {" ".join(args): outcome} of those that ran."""
        self.batches += 1
        named = [
            (str(self.out / f"{self.batches}-{i:02d}-{args[0]}"), args)
            for i, args in enumerate(commands)
        ]
        spec = self.out / f"batch-{self.batches}.json"
        spec.write_text(json.dumps(named))
        results = self.out / f"batch-{self.batches}.results.json"
        began = time.monotonic()
        subprocess.run(
            [sys.executable, "-c", _DRIVER, str(self.out / f"batch-{self.batches}.log"),
             str(spec), str(results)],
            env=self.env, cwd=ROOT, timeout=240, check=True,
        )  # fmt: skip
        log.info("%d drills commands in %.1fs", len(commands), time.monotonic() - began)
        codes = json.loads(results.read_text())
        return {
            " ".join(args): Outcome(
                codes[name], Path(name + ".stdout").read_text(), Path(name + ".stderr").read_text()
            )
            for name, args in named
            if name in codes
        }


@dataclass
class captured_logs:  # noqa: N801 - used as a context manager, reads like one
    """DEBUG records of LOGGERS into ``path`` while inside the block."""

    path: Path
    _saved: dict[str, int] = field(default_factory=dict)

    def __enter__(self) -> None:
        self._handler = logging.FileHandler(self.path)
        self._handler.setLevel(logging.DEBUG)
        for name in LOGGERS:
            logger = logging.getLogger(name)
            self._saved[name] = logger.level
            logger.setLevel(logging.DEBUG)
            logger.addHandler(self._handler)

    def __exit__(self, *_: object) -> None:
        for name, level in self._saved.items():
            logger = logging.getLogger(name)
            logger.setLevel(level)
            logger.removeHandler(self._handler)
        self._handler.close()
