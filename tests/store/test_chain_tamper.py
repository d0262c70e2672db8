"""The tamper set a hash chain alone cannot see, on SQLite and PostgreSQL: the newest run cut
off with its journal and links (truncation), records edited then the chain tables emptied
so that they would be sealed again (re-sealing), the chain emptied, the whole chain
rebuilt; and `verify --db` on a store that is not there. Checkpoints kept outside the store
catch the first and the last; every opener refuses the others; verify never writes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from drills.evidence.checkpoints import read_checkpoints, write_checkpoints
from drills.store import chain
from drills.store.chain_report import ChainReport
from drills.store.chain_verify import verify_store
from drills.store.checkpoints import ChainTamperedError
from drills.store.history import HistoryStore
from tests.evidence.packs import drills
from tests.store.test_chain import db, record_drill
from tests.store.test_chain import store as store
from tests.support.rawdb import RawDatabase


def _cut_off_newest_run(store: HistoryStore, *, with_checkpoints: bool) -> None:
    """What someone with a SQL shell does to make the newest drill never have happened."""
    with db(store) as conn:
        conn.execute("DELETE FROM journal WHERE run_id = 'run-c'")
        conn.execute("DELETE FROM drill_runs WHERE id = 'run-c'")
        conn.execute("DELETE FROM evidence_chain WHERE run_id = 'run-c'")
        if with_checkpoints:  # the store's own checkpoints that would give it away
            conn.execute(
                "DELETE FROM evidence_checkpoints WHERE length >"
                " (SELECT MAX(seq) FROM evidence_chain)"
            )


def _keep_outside(store: HistoryStore, place: Path) -> None:
    write_checkpoints(str(place), store.take_checkpoints())


def _problems(report: ChainReport) -> list[tuple[str, str]]:
    return [(p.plan, p.what) for p in report.problems]


def test_truncation_passes_the_chain_alone_but_not_the_checkpoints_kept_outside(
    store: HistoryStore, tmp_path: Path
) -> None:
    outside = tmp_path / "checkpoints"
    _keep_outside(store, outside)
    assert verify_store(store).ok
    _cut_off_newest_run(store, with_checkpoints=True)

    assert verify_store(store).ok  # what a hash chain alone cannot see
    found = read_checkpoints(str(outside))
    assert not found.problems and found.checkpoints
    report = verify_store(store, found.checkpoints)
    assert ("lab", "truncated") in _problems(report)
    code, out = drills("evidence", "verify", "--db", store.url, "--checkpoints", str(outside))
    assert code == 1, out
    assert "lab: the chain has" in out and "fewer than the checkpoint" in out
    assert str(outside) in out


def test_truncation_under_the_stores_own_checkpoint_is_refused_on_open(
    store: HistoryStore,
) -> None:
    _cut_off_newest_run(store, with_checkpoints=False)
    with pytest.raises(ChainTamperedError, match=r"chain of plan lab has .* fewer than"):
        HistoryStore(store.url)
    assert ("lab", "truncated") in _problems(verify_store(store))
    code, out = drills("evidence", "verify", "--db", store.url)
    assert code == 1 and "truncated" in out, out


def _links(store: HistoryStore) -> int:
    with db(store) as conn:
        (count,) = conn.execute("SELECT COUNT(*) FROM evidence_chain").fetchone()
    return int(count)


def test_an_edit_then_the_chain_tables_emptied_is_never_sealed_again(store: HistoryStore) -> None:
    with db(store) as conn:
        conn.execute("UPDATE drill_runs SET rto_seconds = 0.5 WHERE id = 'run-a'")
        conn.execute("DELETE FROM evidence_chain")
        conn.execute("DELETE FROM evidence_meta")
    with pytest.raises(ChainTamperedError, match="marker is gone"):
        HistoryStore(store.url)
    for command in (
        ("history", "--db", store.url),
        ("db", "upgrade", "--db", store.url),
        ("evidence", "verify", "--db", store.url),
        ("evidence", "checkpoint", "--out", "unused", "--db", store.url),
    ):
        code, out = drills(*command)
        assert code == 1, (command, out)
        assert "tampered" in out, (command, out)
    assert _links(store) == 0  # nothing re-sealed the edited run as "pre-chain"
    report = verify_store(store)
    assert _problems(report)[0] == ("(the store)", "tampered")
    assert not report.pre_chain


def test_the_chain_emptied_with_its_marker_kept_is_tampered(store: HistoryStore) -> None:
    with db(store) as conn:
        conn.execute("DELETE FROM evidence_chain")
        conn.execute("DELETE FROM evidence_checkpoints")
    with pytest.raises(ChainTamperedError, match="final records but no evidence chain"):
        HistoryStore(store.url)
    code, out = drills("evidence", "verify", "--db", store.url)
    assert code == 1 and "the chain was emptied" in out, out
    assert _links(store) == 0


def test_a_chain_rebuilt_from_scratch_differs_from_the_checkpoints_kept_outside(
    store: HistoryStore, tmp_path: Path
) -> None:
    outside = tmp_path / "checkpoints"
    _keep_outside(store, outside)
    with db(store) as conn:
        conn.execute("UPDATE drill_runs SET rto_seconds = 0.5 WHERE id = 'run-a'")
        conn.execute("DELETE FROM evidence_chain")
        conn.execute("DELETE FROM evidence_meta")
        conn.execute("DELETE FROM evidence_checkpoints")
    with Session(store.engine) as session, session.begin():
        chain.upgrade(session)  # an attacker with drills' own code seals it all again
    record_drill(store, "run-d")  # and a drill since makes the chain longer than before
    assert verify_store(store).ok
    report = verify_store(store, read_checkpoints(str(outside)).checkpoints)
    assert ("lab", "rewritten") in _problems(report)
    code, out = drills("evidence", "verify", "--db", store.url, "--checkpoints", str(outside))
    assert code == 1 and "lab: the chain holds link" in out, out


def _missing_url(db_url: str, tmp_path: Path) -> str:
    if db_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'typo' / 'histroy.db'}"
    return db_url.rsplit("/", 1)[0] + "/drills_no_such_store"


def _databases(db_url: str) -> set[str]:
    with RawDatabase(db_url) as conn:
        return {name for (name,) in conn.execute("SELECT datname FROM pg_database")}


def test_verify_on_a_store_that_is_not_there_is_exit_2_and_creates_nothing(
    db_url: str, tmp_path: Path
) -> None:
    missing = _missing_url(db_url, tmp_path)
    code, out = drills("evidence", "verify", "--db", missing)
    assert code == 2, out
    assert "history store" in out and "Traceback" not in out
    if db_url.startswith("sqlite"):
        assert not (tmp_path / "typo").exists()
    else:
        assert "drills_no_such_store" not in _databases(db_url)
    # An empty database (PostgreSQL's, an empty file) is no store either: nothing is made in it.
    if db_url.startswith("sqlite"):
        (tmp_path / "empty.db").touch()
        db_url = f"sqlite:///{tmp_path / 'empty.db'}"
    code, out = drills("evidence", "verify", "--db", db_url)
    assert code == 2 and "holds no history store" in out, out
    with RawDatabase(db_url) as conn:
        if db_url.startswith("sqlite"):
            tables = conn.execute("SELECT name FROM sqlite_master").fetchall()
        else:
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
    assert tables == []


def _fingerprint(store: HistoryStore) -> tuple[str, ...]:
    with db(store) as conn:
        counts = [
            conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in ("evidence_chain", "evidence_meta", "evidence_checkpoints", "audit_log")
        ]
    found = tuple(str(c) for c in counts)
    if store.url.startswith("sqlite:///"):
        path = Path(store.url.removeprefix("sqlite:///"))
        found += (hashlib.sha256(path.read_bytes()).hexdigest(),)
    return found


def test_verify_only_reads(store: HistoryStore, tmp_path: Path) -> None:
    outside = tmp_path / "checkpoints"
    _keep_outside(store, outside)
    store.close()  # its WAL folded in: the file is all there is to compare
    before = _fingerprint(store)
    code, out = drills("evidence", "verify", "--db", store.url, "--checkpoints", str(outside))
    assert code == 0 and "agrees with 1 checkpoint(s)" in out, out
    assert _fingerprint(store) == before
