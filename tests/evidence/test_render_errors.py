"""What goes wrong printing the PDF or loading a key is a DrillError naming the cause."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from drills.errors import DrillError
from drills.evidence import render
from drills.evidence.dsse import EnvelopeError
from drills.evidence.keys import SigningKeyError, load_verifier
from drills.evidence.render import RenderError, chromium_problem, to_pdf


def test_the_evidence_errors_are_drill_errors() -> None:
    for error in (RenderError, SigningKeyError, EnvelopeError):
        assert issubclass(error, DrillError)
    assert issubclass(EnvelopeError, ValueError)  # as before, for whoever catches that


def test_a_chromium_that_cannot_run_is_a_render_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "no-such-chromium"
    monkeypatch.setenv("DRILLS_CHROMIUM", str(missing))
    assert chromium_problem() is not None and str(missing) in str(chromium_problem())
    with pytest.raises(RenderError, match="no-such-chromium"):
        to_pdf("<p>x</p>")


def test_chromium_gets_no_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A "Chromium" that writes its environment where the PDF goes.
    fake = tmp_path / "chromium"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "out = [a for a in sys.argv if a.startswith('--print-to-pdf=')][0].split('=', 1)[1]\n"
        "open(out, 'w').write('\\n'.join(sorted(os.environ)))\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("DRILLS_CHROMIUM", str(fake))
    monkeypatch.setenv("DRILLS_DB_URL", "postgresql://u:secret@db/h")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    assert chromium_problem() is None
    names = set(to_pdf("<p>x</p>").decode().split("\n"))
    assert "DRILLS_DB_URL" not in names
    allowed = {"HOME", "PATH", "LANG", "TMPDIR"} | {n for n in names if n.startswith("LC_")}
    assert {"HOME", "LC_ALL"} <= names <= allowed, names
    assert render.find_chromium() == str(fake)


def test_a_public_key_of_another_algorithm_is_a_signing_key_error(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    path = tmp_path / "ec.pub"
    path.write_bytes(pem)
    with pytest.raises(SigningKeyError):
        load_verifier(path)
