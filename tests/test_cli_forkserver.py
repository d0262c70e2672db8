"""The tests' way of running `python -m drills` (tests.support.cli): a process of its own,
as an operator's, with nothing of the fork server's state but the libraries it loaded."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from drills_lab.procs import free_port
from tests.support.cli import drills_process

ROOT = Path(__file__).resolve().parents[1]

# Loads the fork server's modules with the environment and the working directory watched,
# and prints what drills' own modules read of them while being imported.
AUDIT = """
import importlib, json, os, sys
from tests.support.cli_forkserver import PRELOAD
reads = []
def watched(name):
    frame = sys._getframe(2)  # past the lambda: the reader, unless it is os.getenv and the like
    while frame.f_globals.get("__name__") in ("os", "collections.abc"):
        frame = frame.f_back
    if frame.f_globals.get("__name__", "").startswith("drills"):
        reads.append([frame.f_globals["__name__"], name])
get, cwd = os._Environ.__getitem__, os.getcwd
os._Environ.__getitem__ = lambda self, key: (watched(key), get(self, key))[1]
os.getcwd = lambda: (watched("<cwd>"), cwd())[1]
for name in PRELOAD:
    importlib.import_module(name)
loaded = sorted(m for m in sys.modules if m.startswith("drills"))
print(json.dumps({"reads": reads, "drills": loaded}))
"""


def test_the_preloaded_drills_modules_read_no_environment_when_imported() -> None:
    done = subprocess.run(
        [sys.executable, "-c", AUDIT], capture_output=True, text=True, cwd=ROOT, timeout=120,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    audit = json.loads(done.stdout)
    assert "drills.plan" in audit["drills"]  # the audit saw drills imported at all
    assert audit["reads"] == []
    assert not [m for m in audit["drills"] if m.startswith("drills.cli")]
    # A check registers as it is imported: preloaded, it would take the fork server's place
    # in the registry's order rather than the command's.
    assert not [m for m in audit["drills"] if m.startswith("drills.checks.areas.")]


def test_each_call_is_its_own_process_with_its_own_environment_and_directory(
    tmp_path: Path,
) -> None:
    plan = tmp_path / "absent.yaml"
    first = drills_process(["plan", "validate", str(plan)])
    assert first.returncode == 2
    assert "the plan file does not exist" in first.stderr
    assert first.args == [sys.executable, "-m", "drills", "plan", "validate", str(plan)]
    # The environment is the call's: the store URL it names, not the server's.
    listed = drills_process(["history", "--json"])
    assert listed.returncode == 0, listed.stderr
    refused = drills_process(["history", "--json"], env=dict(os.environ, DRILLS_DB_URL="ftp://x"))
    assert refused.returncode == 2, refused.stderr
    # A relative path resolves against the working directory given.
    (tmp_path / "sub").mkdir()
    (tmp_path / "here.yaml").write_text("{}")
    here = drills_process(["plan", "validate", "here.yaml"], cwd=tmp_path)
    assert here.returncode == 2
    assert "does not exist" not in here.stderr, here.stderr
    elsewhere = drills_process(["plan", "validate", "here.yaml"], cwd=tmp_path / "sub")
    assert "the plan file does not exist" in elsewhere.stderr
    # And stdin is the input given.
    hashed = drills_process(["ui", "hash-password", "--stdin"], input="s3cret-enough-pw\n")
    assert hashed.returncode == 0, hashed.stderr
    assert hashed.stdout.startswith("scrypt$")


def test_a_call_past_its_timeout_is_killed(tmp_path: Path) -> None:
    """`drills metrics serve` runs until stopped: here, until its timeout kills it."""
    port = free_port()
    serve = ["metrics", "serve", "--port", str(port), "--db", f"sqlite:///{tmp_path / 'h.db'}"]
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        drills_process([*serve, "--plans", str(tmp_path / "none-*.yaml")], timeout=8)
    assert time.monotonic() - started < 30
    with socket.socket() as probe:  # the killed exporter no longer listens
        assert probe.connect_ex(("127.0.0.1", port)) != 0
