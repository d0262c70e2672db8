"""Hostile files given to `drills evidence verify` and `keygen`: each is refused with one
clear line, never a traceback, a hang, or memory without bound.

The packs are assembled here from the pack module's own parts (DSSE envelope, in-toto
Statement, manifest), signed with a real key: no store or browser needed.
"""

from __future__ import annotations

import base64
import json
import os
import resource
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from drills.cli import app
from drills.evidence import dsse
from drills.evidence.keys import Signer, keygen, load_signer
from drills.evidence.pack import (
    CONTENT,
    ENVELOPE,
    MANIFEST,
    MAX_PACK_BYTES,
    MAX_RATIO,
    PACK_FORMAT,
    Pack,
    sha256,
    zip_bytes,
)
from drills.plan.refs import SecretRef

MIB = 1024 * 1024
# The drills command in a process of its own whose address space is capped: a pack read
# whole, or /dev/zero read as a key, ends in MemoryError there instead of filling the host.
MEMORY_CAP = 1024 * MIB
DRILLS = Path(sys.executable).with_name("drills")


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    tmp = tmp_path_factory.mktemp("hostile-keys")
    private, public, keyid = keygen(tmp / "keys")
    signer = load_signer(SecretRef.parse(f"file:{private}"))
    assert signer is not None
    return {"signer": signer, "public": public, "keyid": keyid}


def content(**changed: bytes) -> dict[str, bytes]:
    files = {name: f"{name} of run-1\n".encode() for name in CONTENT}
    # A pack made before its plan had a checkpoint: the checkpoint is checked elsewhere.
    files["checkpoint.json"] = b"null\n"
    return files | changed


def assemble(files: dict[str, bytes], signer: Signer | None, manifest: bytes | None = None) -> Pack:
    """A pack as `drills evidence export` makes one: manifest, Statement over every file,
    DSSE envelope (signed when ``signer``)."""
    files = dict(files)
    files[MANIFEST] = manifest or json.dumps(
        {"format": PACK_FORMAT, "run_id": "run-1",
         "files": {name: sha256(files[name]) for name in CONTENT}}
    ).encode()  # fmt: skip
    statement = dsse.statement({n: sha256(d) for n, d in files.items()}, {"run_id": "run-1"})
    body = json.dumps(statement, sort_keys=True).encode()
    files[ENVELOPE] = json.dumps(dsse.envelope(body, signer)).encode()
    return Pack(files, signer is not None, signer.keyid if signer else None)


def write(pack: Pack, path: Path) -> Path:
    path.write_bytes(zip_bytes(pack))
    return path


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})


def assert_clear_refusal(result: Result, code: int, *expected: str) -> None:
    """Exit ``code``, each ``expected`` text said, and no exception escaped (CliRunner
    turns one into exit 1 too, so the code alone proves nothing)."""
    assert isinstance(result.exception, SystemExit | None), repr(result.exception)
    assert result.exit_code == code, result.output
    for text in expected:
        assert text in result.output, result.output
    assert "Traceback" not in result.output


def capped(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`drills ARGS` in a process of its own, its memory capped; a hang fails the test."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    env = os.environ | {"COLUMNS": "250"}
    return subprocess.run(
        [str(DRILLS), *args], capture_output=True, text=True, timeout=timeout, env=env,
        preexec_fn=cap, check=False,
    )  # fmt: skip


def test_an_assembled_pack_verifies_so_each_refusal_below_is_the_hostile_part(
    keys: dict[str, object], tmp_path: Path
) -> None:
    pack = write(assemble(content(), keys["signer"]), tmp_path / "good.zip")  # type: ignore[arg-type]
    result = invoke("evidence", "verify", str(pack), "--public-key", str(keys["public"]))
    assert_clear_refusal(result, 0, f"✓ signature holds: key {keys['keyid']}")
    done = capped("evidence", "verify", str(pack), "--public-key", str(keys["public"]))
    assert done.returncode == 0, done.stderr  # the memory cap leaves room for honest work


# --- zip bombs ----------------------------------------------------------------------------


def _deflated_zeros(size: int) -> tuple[bytes, int]:
    """``size`` zero bytes, raw-deflated, and their CRC-32; never all in memory at once."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, -15)
    block, crc, parts = bytes(MIB), 0, []
    for _ in range(size // MIB):
        parts.append(squeeze.compress(block))
        crc = zlib.crc32(block, crc)
    parts.append(squeeze.flush())
    return b"".join(parts), crc


def bomb(path: Path, names: list[str], size: int, declared: int | None = None) -> Path:
    """A zip whose every member inflates to ``size`` zeros (declaring ``declared`` bytes,
    to lie), written by hand: the deflated zeros are made once and reused, so the bomb
    costs a few MB of disk and a second to build."""
    data, crc = _deflated_zeros(size)
    stated = size if declared is None else declared
    local, central = bytearray(), bytearray()
    for name in names:
        raw = name.encode()
        sizes = (crc, len(data), stated, len(raw))
        head = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, *sizes, 0)
        central += struct.pack(
            "<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, *sizes, 0, 0, 0, 0, 0,
            len(local),
        ) + raw  # fmt: skip
        local += head + raw + data
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(names), len(names), len(central),
                      len(local), 0)  # fmt: skip
    path.write_bytes(bytes(local + central + end))
    return path


def test_a_zip_bomb_is_refused_unread_within_bounded_memory(tmp_path: Path) -> None:
    # The report's case: 50 members of 60 MB zeros, each under the 64 MiB member limit.
    names = [*CONTENT, MANIFEST, ENVELOPE]
    names += [f"extra-{i:02}.bin" for i in range(50 - len(names))]
    pack = bomb(tmp_path / "bomb.zip", names, 60 * MIB)
    assert pack.stat().st_size < 4 * MIB and len(names) == 50
    began = time.monotonic()
    done = capped("evidence", "verify", str(pack), "--allow-unsigned")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert f"more than any pack (100 files, {MAX_PACK_BYTES // MIB} MiB): not read" in done.stderr
    assert time.monotonic() - began < 60  # refused from the zip's directory, not inflated


def test_one_member_that_inflates_a_thousandfold_is_refused(tmp_path: Path) -> None:
    # Under every size bound (one 60 MB member), but no pack file is 1000-fold zeros.
    pack = bomb(tmp_path / "ratio.zip", ["report.pdf"], 60 * MIB)
    result = invoke("evidence", "verify", str(pack), "--allow-unsigned")
    assert_clear_refusal(result, 1, f"more than {MAX_RATIO}-fold: a zip bomb")


def test_a_member_that_inflates_past_its_declared_size_is_cut_there(tmp_path: Path) -> None:
    # It says 1 MiB, under the ratio's floor, and holds 60 MB: inflating stops at 1 MiB
    # and the CRC (of the 60 MB) then fails; memory never holds more.
    pack = bomb(tmp_path / "liar.zip", ["report.pdf"], 60 * MIB, declared=MIB)
    done = capped("evidence", "verify", str(pack), "--allow-unsigned")
    assert done.returncode == 1, done.stderr
    assert "report.pdf: damaged in the zip" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


# --- deep JSON ----------------------------------------------------------------------------

DEEP = b"[" * 200_000 + b"]" * 200_000


@pytest.mark.parametrize("where", ["envelope", "payload", "manifest"])
def test_deeply_nested_json_is_a_clear_error(
    keys: dict[str, object], tmp_path: Path, where: str
) -> None:
    signer: Signer = keys["signer"]  # type: ignore[assignment]
    if where == "manifest":  # signed, its hash in the Statement: only its shape is wrong
        pack = assemble(content(), signer, manifest=DEEP)
    else:
        pack = assemble(content(), signer)
        envelope = json.loads(pack.files[ENVELOPE])
        if where == "payload":
            envelope["payload"] = base64.b64encode(DEEP).decode()
            pack.files[ENVELOPE] = json.dumps(envelope).encode()
        else:
            pack.files[ENVELOPE] = DEEP
    path = write(pack, tmp_path / f"deep-{where}.zip")
    result = invoke("evidence", "verify", str(path), "--public-key", str(keys["public"]))
    assert_clear_refusal(result, 1, "nested too deeply")


# --- blocking and endless files -----------------------------------------------------------


def test_a_fifo_as_the_pack_is_refused_at_once(keys: dict[str, object], tmp_path: Path) -> None:
    fifo = tmp_path / "pack.zip"
    os.mkfifo(fifo)
    done = capped("evidence", "verify", str(fifo), "--public-key", str(keys["public"]), timeout=60)
    assert done.returncode == 1, done.stderr
    assert "pack.zip: is a FIFO (named pipe), not a regular file" in done.stderr


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_fifo_or_an_endless_device_as_the_key_is_refused(
    keys: dict[str, object], tmp_path: Path, kind: str
) -> None:
    pack = write(assemble(content(), keys["signer"]), tmp_path / "good.zip")  # type: ignore[arg-type]
    key = Path(kind)
    if kind == "fifo":
        key = tmp_path / "signing.pub"
        os.mkfifo(key)
    done = capped("evidence", "verify", str(pack), "--public-key", str(key), timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    what = "a FIFO (named pipe)" if kind == "fifo" else "a character device"
    assert f"public key {key} is {what}, not a regular file" in done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr


# --- signatures ---------------------------------------------------------------------------


def _stripped(tmp_path: Path) -> Path:
    """A signed pack whose report was edited, re-hashed, and its signature removed."""
    edited = content(**{"report.json": b'{"verdict": "met"}\n'})
    return write(assemble(edited, None), tmp_path / "stripped.zip")


def test_a_stripped_signature_fails_whenever_a_key_is_given(
    keys: dict[str, object], tmp_path: Path
) -> None:
    pack = _stripped(tmp_path)
    public = str(keys["public"])
    for extra in ([], ["--allow-unsigned"]):
        result = invoke("evidence", "verify", str(pack), "--public-key", public, *extra)
        assert_clear_refusal(result, 1, "signature: none in attestation.dsse.json, but a "
                                        "public key was given")  # fmt: skip
    result = invoke("evidence", "verify", str(pack), "--public-key", public, "--allow-unsigned",
                    "--json")  # fmt: skip
    assert_clear_refusal(result, 1)
    verdict = json.loads(result.stdout)
    assert verdict["ok"] is False and verdict["signed"] is False
    # Without a key, --allow-unsigned still means what it says (and says UNSIGNED).
    result = invoke("evidence", "verify", str(pack), "--allow-unsigned")
    assert_clear_refusal(result, 0, "UNSIGNED")


def test_a_relabelled_key_id_is_flagged_and_the_verifying_key_reported(
    keys: dict[str, object], tmp_path: Path
) -> None:
    pack = assemble(content(), keys["signer"])  # type: ignore[arg-type]
    envelope = json.loads(pack.files[ENVELOPE])
    envelope["signatures"][0]["keyid"] = "f" * 64
    pack.files[ENVELOPE] = json.dumps(envelope).encode()
    path = write(pack, tmp_path / "relabelled.zip")
    result = invoke("evidence", "verify", str(path), "--public-key", str(keys["public"]))
    relabelled = f"labelled key {'f' * 64}, but it verifies with key {keys['keyid']}"
    assert_clear_refusal(result, 1, f"✓ signature holds: key {keys['keyid']}", relabelled)
    assert f"holds: key {'f' * 64}" not in result.output
    result = invoke("evidence", "verify", str(path), "--public-key", str(keys["public"]), "--json")
    verdict = json.loads(result.stdout)
    assert verdict["ok"] is False and verdict["signature_ok"] is True
    assert verdict["keyid"] == keys["keyid"] and verdict["keyid_label"] == "f" * 64


# --- keygen -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["signing.pub", "signing.key"])
def test_keygen_never_writes_through_a_dangling_symlink(tmp_path: Path, name: str) -> None:
    directory, outside = tmp_path / "keys", tmp_path / "elsewhere" / "planted"
    directory.mkdir()
    outside.parent.mkdir()
    (directory / name).symlink_to(outside)  # dangling: nothing at `outside` yet
    result = invoke("evidence", "keygen", str(directory))
    assert_clear_refusal(result, 1, "already exists; give --force")
    assert not outside.exists() and (directory / name).is_symlink()
    # --force replaces the link itself with a file in DIR; nothing is written outside.
    result = invoke("evidence", "keygen", str(directory), "--force")
    assert_clear_refusal(result, 0, "✓ public key")
    assert not outside.exists()
    for written in ("signing.key", "signing.pub"):
        assert not (directory / written).is_symlink() and (directory / written).is_file()
    assert (directory / "signing.key").stat().st_mode & 0o777 == 0o600
