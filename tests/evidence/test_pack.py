"""Evidence packs: export, then verify; every change to a pack is caught and named.

On a store holding runs written as a drill writes them (tests/evidence/support.py); the
lab's real drill is in test_on_the_lab.py.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from drills.evidence.checkpoints import pack_problems
from drills.evidence.keys import SIGNING_KEY_ENV, keygen
from drills.evidence.pack import CONTENT, ENVELOPE, MANIFEST
from drills.store.kinds import RunStatus
from tests.evidence.packs import drills, flip_byte, members, pdf_text, rewrite
from tests.evidence.support import check, make_run, phase, store_with
from tests.support.services import require_system_binary

EVERY_FILE = (*CONTENT, MANIFEST, ENVELOPE)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | str]:
    """A store with a failed drill then a passing one, a key pair, and the passing run's
    pack, signed; and an unsigned pack of the failed run."""
    require_system_binary("chromium", "chromium")
    tmp = tmp_path_factory.mktemp("evidence")
    failed = [phase("smoke", ("GET /health <script>", "failed", "HTTP 503 <b>x</b>"))]
    store = store_with(
        tmp,
        make_run("run-failed", status=RunStatus.ROLLED_BACK, phases=failed,
                 checks=[check("dns-ttl", "fail", "lower the TTL to 60s")]),
        make_run("run-passed", days=7, checks=[check("dns-ttl", "pass")]),
    )  # fmt: skip
    store.close()
    private, public, _ = keygen(tmp / "keys")
    _, other, _ = keygen(tmp / "other-keys")
    db = f"sqlite:///{tmp}/history.db"
    signed, unsigned = tmp / "signed.zip", tmp / "unsigned.zip"
    code, out = drills("evidence", "export", "run-passed", "--out", str(signed), "--db", db,
                       env={SIGNING_KEY_ENV: f"file:{private}"})  # fmt: skip
    assert code == 0, out
    code, out = drills("evidence", "export", "run-failed", "--out", str(unsigned), "--db", db,
                       env={SIGNING_KEY_ENV: ""})  # fmt: skip
    assert code == 0, out
    assert "UNSIGNED" in out
    return {"tmp": tmp, "db": db, "public": public, "other": other, "signed": signed,
            "unsigned": unsigned}  # fmt: skip


def _verify(pack: Path, key: Path, *more: str) -> tuple[int, str]:
    return drills("evidence", "verify", str(pack), "--public-key", str(key), *more)


def test_an_untouched_pack_verifies(world: dict[str, Path]) -> None:
    code, out = _verify(world["signed"], world["public"])
    assert code == 0, out
    assert f"{len(EVERY_FILE) - 1} files match" in out
    assert "signature holds" in out
    assert sorted(members(world["signed"])) == sorted(EVERY_FILE)


@pytest.mark.parametrize("name", EVERY_FILE)
def test_one_byte_changed_in_any_file_is_named(world: dict[str, Path], name: str) -> None:
    def change(files: dict[str, bytes]) -> None:
        files[name] = flip_byte(files[name])

    changed = rewrite(world["signed"], world["tmp"] / f"changed-{name}.zip", change)
    code, out = _verify(changed, world["public"])
    assert code == 1, out
    if name == ENVELOPE:
        assert ENVELOPE in out or "signature" in out
    else:
        assert f"{name}: SHA-256 differs" in out


def test_a_byte_changed_in_the_zip_itself_is_named(world: dict[str, Path]) -> None:
    raw = world["signed"].read_bytes()
    with zipfile.ZipFile(world["signed"]) as zf:
        info = zf.getinfo("report.json")
    # Inside report.json's compressed data: its header is 30 bytes plus its name.
    at = info.header_offset + 30 + len("report.json") + info.compress_size // 2
    damaged = world["tmp"] / "damaged.zip"
    damaged.write_bytes(raw[:at] + bytes([raw[at] ^ 0x01]) + raw[at + 1 :])
    code, out = _verify(damaged, world["public"])
    assert code == 1 and "report.json" in out, out


def test_a_file_removed_or_added_is_named(world: dict[str, Path]) -> None:
    def remove(files: dict[str, bytes]) -> None:
        del files["report.pdf"]

    removed = rewrite(world["signed"], world["tmp"] / "removed.zip", remove)
    code, out = _verify(removed, world["public"])
    assert code == 1 and "report.pdf: missing from the pack" in out, out
    added = rewrite(world["signed"], world["tmp"] / "added.zip",
                    lambda f: f.update({"extra.txt": b"trust me"}))  # fmt: skip
    code, out = _verify(added, world["public"])
    assert code == 1 and "extra.txt: not in the signed statement" in out, out


def test_a_signature_by_another_key_is_named(world: dict[str, Path]) -> None:
    code, out = _verify(world["signed"], world["other"])
    assert code == 1
    assert "signature:" in out and "does not verify" in out


def test_a_pack_resigned_with_another_key_after_a_change_fails(world: dict[str, Path]) -> None:
    """Changing a file and re-exporting the statement needs the key: another key fails."""
    other_private = world["other"].with_suffix(".key")
    code, out = drills("evidence", "export", "run-passed", "--out",
                       str(world["tmp"] / "by-other.zip"), "--db", str(world["db"]),
                       env={SIGNING_KEY_ENV: f"file:{other_private}"})  # fmt: skip
    assert code == 0, out
    code, out = _verify(world["tmp"] / "by-other.zip", world["public"])
    assert code == 1 and "signature:" in out


def test_an_unsigned_pack_says_so(world: dict[str, Path]) -> None:
    code, out = _verify(world["unsigned"], world["public"])
    assert code == 1 and "UNSIGNED" in out
    # A key given asks for a signature by it, --allow-unsigned or not; without a key,
    # --allow-unsigned accepts a pack whose files match (and still says UNSIGNED).
    code, out = _verify(world["unsigned"], world["public"], "--allow-unsigned")
    assert code == 1 and "signature: none in" in out
    code, out = drills("evidence", "verify", str(world["unsigned"]), "--allow-unsigned")
    assert code == 0 and "UNSIGNED" in out
    manifest = json.loads(members(world["unsigned"])[MANIFEST])
    assert manifest["signed"] is False and manifest["keyid"] is None
    code, out = drills("evidence", "verify", str(world["signed"]))
    assert code == 1 and "give --public-key" in out


def test_verify_json(world: dict[str, Path]) -> None:
    code, out = _verify(world["signed"], world["public"], "--json")
    assert code == 0
    found = json.loads(out)
    assert found["ok"] and found["signed"] and found["run_id"] == "run-passed"


def test_the_pack_carries_the_plans_newest_checkpoint(world: dict[str, Path]) -> None:
    files = members(world["signed"])
    checkpoint = json.loads(files["checkpoint.json"])
    links = json.loads(files["chain.json"])
    assert checkpoint["plan"] == links[0]["plan"]
    assert checkpoint["length"] >= max(link["seq"] for link in links)
    # One that no longer covers the run's links (edited, the pack re-hashed) is named.
    short = json.dumps(checkpoint | {"length": links[0]["seq"] - 1}).encode()
    problems = pack_problems(files | {"checkpoint.json": short}, None)
    assert any("checkpoint.json: covers" in p for p in problems), problems


def test_the_pack_answers_the_auditor(world: dict[str, Path]) -> None:
    files = members(world["unsigned"])
    controls = json.loads(files["controls.json"])
    assert [c["control"] for c in controls["controls"]] == ["Art. 11(6)", "A1.3", "§8.5"]
    assert controls["participants"]["operator"] == "alice"
    assert controls["objectives"][0]["objective"] == "RTO"
    issues = {f["key"]: f for f in controls["issues_found"]}
    assert issues["dns-ttl"]["remediation"] == "lower the TTL to 60s"
    assert issues["smoke / GET /health <script>"]["open"]
    report = files["report.md"].decode()
    assert "## Evidence for auditors" in report and "DORA" in report
    assert "lower the TTL to 60s" in report
    # The passing run closed the readiness finding; its pack says so.
    found = json.loads(members(world["signed"])["findings.json"])
    closed = next(f for f in found if f["key"] == "dns-ttl")
    assert closed["closed_run"] == "run-passed" and not closed["open"]


def test_the_pdf_opens_and_shows_the_verdict(world: dict[str, Path]) -> None:
    pdf = world["tmp"] / "report.pdf"
    pdf.write_bytes(members(world["signed"])["report.pdf"])
    text = pdf_text(pdf)
    assert "Drill report" in text and "verdict: met" in text.replace("  ", " ")
    assert all(word in text for word in ("DORA", "SOC 2", "22301", "Evidence for auditors"))
    failed = world["tmp"] / "failed.pdf"
    failed.write_bytes(members(world["unsigned"])["report.pdf"])
    text = pdf_text(failed)
    assert "failed" in text
    assert "<script>" in text  # outside text shown as text, never run as markup


def test_export_refuses_an_unusable_key_and_an_unknown_run(world: dict[str, Path]) -> None:
    out_pack = world["tmp"] / "never.zip"
    bad_key = {SIGNING_KEY_ENV: "env:NO_SUCH_VAR_FOR_KEY"}
    code, out = drills("evidence", "export", "run-passed", "--out", str(out_pack), "--db",
                       str(world["db"]), env=bad_key)  # fmt: skip
    assert code == 2 and "NO_SUCH_VAR_FOR_KEY" in out and not out_pack.exists()
    code, out = drills("evidence", "export", "nope", "--out", str(out_pack), "--db",
                       str(world["db"]), env={SIGNING_KEY_ENV: ""})  # fmt: skip
    assert code == 1 and "no run" in out
