"""DSSE and in-toto, as their specifications write them."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from drills.evidence import dsse
from drills.evidence.keys import (
    SIGNING_KEY_ENV,
    SigningKeyError,
    configured_reference,
    keygen,
    load_signer,
    load_verifier,
)


def test_pae_is_the_specifications_example() -> None:
    # github.com/secure-systems-lab/dsse, protocol.md
    assert dsse.pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert dsse.pae("", b"") == b"DSSEv1 0  0 "
    assert dsse.pae("t/é", b"x") == b"DSSEv1 4 t/\xc3\xa9 1 x"  # lengths in bytes


@pytest.fixture()
def keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    private, public, _ = keygen(tmp_path / "keys")
    monkeypatch.setenv(SIGNING_KEY_ENV, f"file:{private}")
    return private, public


def test_keygen_writes_a_private_key_only_its_owner_reads(keys: tuple[Path, Path]) -> None:
    private, public = keys
    assert private.stat().st_mode & 0o777 == 0o600
    assert b"PRIVATE KEY" in private.read_bytes()
    assert b"PUBLIC KEY" in public.read_bytes()
    with pytest.raises(FileExistsError):
        keygen(private.parent)


def test_an_envelope_holds_a_statement_and_verifies(keys: tuple[Path, Path]) -> None:
    signer = load_signer(configured_reference())
    verifier = load_verifier(keys[1])
    assert signer is not None and signer.keyid == verifier.keyid
    body = json.dumps(dsse.statement({"b.txt": "1" * 64, "a.txt": "2" * 64}, {"x": 1})).encode()
    env = dsse.envelope(body, signer)
    assert set(env) == {"payload", "payloadType", "signatures"}
    assert env["payloadType"] == "application/vnd.in-toto+json"
    assert env["signatures"][0]["keyid"] == verifier.keyid
    statement = json.loads(base64.b64decode(env["payload"]))
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert [s["name"] for s in statement["subject"]] == ["a.txt", "b.txt"]
    assert statement["subject"][0]["digest"] == {"sha256": "2" * 64}
    opened = dsse.open_envelope(json.dumps(env).encode())
    assert dsse.signed_by(opened, verifier)
    # The signature is over PAE, so the verifier of any DSSE tool agrees.
    verifier.public.verify(base64.b64decode(env["signatures"][0]["sig"]), dsse.pae(
        env["payloadType"], base64.b64decode(env["payload"])))  # fmt: skip


def test_another_key_does_not_verify(keys: tuple[Path, Path], tmp_path: Path) -> None:
    signer = load_signer(configured_reference())
    _, other, _ = keygen(tmp_path / "other")
    body = json.dumps(dsse.statement({}, {})).encode()
    opened = dsse.open_envelope(json.dumps(dsse.envelope(body, signer)).encode())
    assert not dsse.signed_by(opened, load_verifier(other))


def test_a_key_reference_that_does_not_resolve_names_the_reference_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(SIGNING_KEY_ENV, "env:NO_SUCH_SIGNING_KEY")
    with pytest.raises(SigningKeyError, match="NO_SUCH_SIGNING_KEY"):
        load_signer(configured_reference())
    (tmp_path / "k").write_text("not a key at all, but secret-ish text")
    monkeypatch.setenv(SIGNING_KEY_ENV, f"file:{tmp_path / 'k'}")
    with pytest.raises(SigningKeyError) as caught:
        load_signer(configured_reference())
    assert "secret-ish" not in str(caught.value)
    monkeypatch.setenv(SIGNING_KEY_ENV, "-----BEGIN PRIVATE KEY----- inline")
    with pytest.raises(SigningKeyError, match="reference"):
        configured_reference()
    monkeypatch.delenv(SIGNING_KEY_ENV)
    assert load_signer(configured_reference()) is None


def test_the_key_may_come_from_an_environment_variable(
    keys: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_DRILLS_KEY", keys[0].read_text())
    monkeypatch.setenv(SIGNING_KEY_ENV, "env:MY_DRILLS_KEY")
    signer = load_signer(configured_reference())
    assert signer is not None and signer.keyid == load_verifier(keys[1]).keyid
    assert keys[0].read_text() not in repr(signer)
