"""What done means, on the lab: drill it, export the run's pack with a generated key, verify
it (exit 0); change one byte of its report.json and verify again (exit 1, naming the file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drills.evidence.keys import SIGNING_KEY_ENV
from drills.store.history import HistoryStore
from drills_lab.runtime import LabInfo
from tests.evidence.packs import drills, flip_byte, members, pdf_text, rewrite
from tests.support.services import require_system_binary


@pytest.fixture(scope="module")
def drilled_pack(lab: LabInfo, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | str]:
    require_system_binary("chromium", "chromium")
    tmp = tmp_path_factory.mktemp("evidence-lab")
    db = f"sqlite:///{tmp / 'history.db'}"
    plan = str(Path(lab.state_dir) / "plan.yaml")
    code, out = drills("evidence", "keygen", str(tmp / "keys"))
    assert code == 0, out
    code, out = drills("run", plan, "--yes", "--tier-deadline", "20", "--reason", "evidence",
                       "--db", db)  # fmt: skip
    assert code == 0, out
    store = HistoryStore(db)
    (run,) = store.list_runs()
    store.close()
    pack = tmp / "pack.zip"
    code, out = drills("evidence", "export", run.id, "--out", str(pack), "--db", db,
                       env={SIGNING_KEY_ENV: f"file:{tmp / 'keys' / 'signing.key'}"})  # fmt: skip
    assert code == 0, out
    return {"tmp": tmp, "db": db, "pack": pack, "public": tmp / "keys" / "signing.pub",
            "run_id": run.id}  # fmt: skip


def test_export_then_verify_then_one_byte_of_report_json(drilled_pack: dict[str, Path]) -> None:
    pack, public = drilled_pack["pack"], drilled_pack["public"]
    code, out = drills("evidence", "verify", str(pack), "--public-key", str(public))
    assert code == 0, out

    def change(files: dict[str, bytes]) -> None:
        files["report.json"] = flip_byte(files["report.json"])

    changed = rewrite(pack, drilled_pack["tmp"] / "changed.zip", change)
    code, out = drills("evidence", "verify", str(changed), "--public-key", str(public))
    assert code == 1
    assert "report.json: SHA-256 differs" in out


def test_the_pack_of_a_real_drill(drilled_pack: dict[str, Path]) -> None:
    files = members(drilled_pack["pack"])
    report = json.loads(files["report.json"])
    assert report["run"]["verdict"] == "met"
    assert json.loads(files["readiness-t0.json"])["results"]
    assert json.loads(files["journal.json"]) and json.loads(files["timeline.json"])
    links = json.loads(files["chain.json"])
    assert links and {link["kind"] for link in links} >= {"run"}
    pdf = drilled_pack["tmp"] / "report.pdf"
    pdf.write_bytes(files["report.pdf"])
    text = " ".join(pdf_text(pdf).split())
    assert f"Drill report {drilled_pack['run_id']}" in text
    assert "verdict: met" in text


def test_the_history_verifies_and_coverage_says_so(drilled_pack: dict[str, Path]) -> None:
    code, out = drills("evidence", "verify", "--db", str(drilled_pack["db"]))
    assert code == 0 and "the history verifies" in out, out
    # A glob that matches no file: only the plans in the history (a plan file named but
    # missing would be a finding of its own).
    code, out = drills("evidence", "coverage", "--format", "json", "--db",
                       str(drilled_pack["db"]), "--plans", "/nonexistent/*.yaml")  # fmt: skip
    found = json.loads(out[out.index("{") :])
    assert code == 0, out
    assert found["headline"] == "1 of 1 plans drilled in the last 12 months."
    (lab,) = found["plans"]
    assert lab["drilled"] and lab["failback_drilled"] and lab["chain"] == "verifies"


def test_a_changed_history_does_not_verify(drilled_pack: dict[str, Path]) -> None:
    """A copy of the store with the run's operator rewritten in SQL: named, exit 1."""
    import sqlite3

    import sqlalchemy as sa

    source = Path(str(drilled_pack["db"]).removeprefix("sqlite:///"))
    copy = drilled_pack["tmp"] / "changed.db"
    with sqlite3.connect(source) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)  # the WAL's pages too
    engine = sa.create_engine(f"sqlite:///{copy}")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE drill_runs SET operator = 'mallory'"))
    engine.dispose()
    code, out = drills("evidence", "verify", "--db", f"sqlite:///{copy}")
    assert code == 1
    assert drilled_pack["run_id"] in out and "changed" in out, out
    code, out = drills("evidence", "coverage", "--db", f"sqlite:///{copy}", "--plans",
                       "/nonexistent/*.yaml")  # fmt: skip
    assert code == 1 and "does NOT verify" in out
