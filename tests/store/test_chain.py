"""The evidence chain: intact stores verify; an edit, a deletion or an insertion made behind
the store's back is named; concurrent writers keep one gapless chain; old stores upgrade."""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path

import pytest

from drills.store import schema
from drills.store.chain import GENESIS, canonical_json, entry_digest, record_digest
from drills.store.chain_report import ChainReport, run_evidence
from drills.store.chain_verify import verify_store
from drills.store.history import HistoryStore, make_engine
from drills.store.kinds import EntryState, Mode, RunStatus, Verdict
from drills.store.models import DrillRun
from drills.store.schema import SchemaError
from drills.takeover.journal import Journal
from tests.support.rawdb import RawDatabase, as_before_migrations

T0 = dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.UTC)


def _timeline(steps: int = 4) -> list[dict[str, object]]:
    def step(i: int) -> dict[str, object]:
        start = T0 + dt.timedelta(seconds=i)
        return {
            "name": f"step {i}", "started_at": start.isoformat(),
            "ended_at": (start + dt.timedelta(seconds=0.5)).isoformat(), "seconds": 0.5,
            "status": "ok", "result": f"did {i}", "evidence": {"i": i},
        }  # fmt: skip

    return [
        {"name": "fence", "status": "ok", "steps": [step(i) for i in range(steps)]},
        {"name": "dns", "status": "ok", "steps": [step(10)]},
    ]


def record_drill(
    store: HistoryStore, run_id: str, plan: str = "lab", *, finish: bool = True
) -> None:
    """A drill as the takeover writes it: created, journalled, its timeline growing, finished."""
    started = T0 + dt.timedelta(minutes=len(store.list_runs(limit=1000)))
    store.create_run(
        DrillRun(
            id=run_id, plan=plan, plan_digest="sha256:x", mode=Mode.DRILL, operator="bob",
            status=RunStatus.RUNNING, started_at=started,
        )
    )  # fmt: skip
    journal = Journal(store, run_id)
    for i in range(3):
        seq = journal.record("workload.scale", f"dr/Deployment/serving/w{i}", {"r": 0}, {"r": 2})
        journal.mark(seq, EntryState.APPLIED)
    timeline = _timeline()
    for n in range(1, len(timeline[0]["steps"]) + 1):  # type: ignore[arg-type]
        store.update_run(run_id, timeline=[{**timeline[0], "steps": timeline[0]["steps"][:n]}])  # type: ignore[index]
    if finish:
        store.update_run(
            run_id, status=RunStatus.SUCCEEDED, verdict=Verdict.MET, timeline=timeline,
            finished_at=started + dt.timedelta(minutes=1), rto_seconds=2.25,
        )  # fmt: skip


@pytest.fixture()
def store(history: HistoryStore) -> HistoryStore:
    history.save_readiness("lab", T0, True, 0, {"results": [{"check": "images", "ok": True}]})
    record_drill(history, "run-a")
    history.audit(who="alice", action="declare", plan="lab", accepted=True, reason="drill")
    record_drill(history, "run-b")
    history.save_readiness("lab", T0 + dt.timedelta(hours=1), False, 1, {"results": []})
    record_drill(history, "run-c")
    return history


def db(store: HistoryStore) -> RawDatabase:
    """The database as someone with a SQL shell sees it: no store in between."""
    return RawDatabase(store.url)


def problem_of(report: ChainReport) -> tuple[str, str, str]:
    assert not report.ok
    first = report.first_problem
    assert first is not None
    return first.kind, first.key, first.what


def test_an_untouched_store_verifies(store: HistoryStore) -> None:
    report = verify_store(store)
    assert report.ok, report.first_problem
    [lab] = report.plans
    # 3 runs × (3 journal entries × 2 states + 5 steps + the run) + 2 snapshots + 1 audit event
    assert lab.links == 3 * (6 + 5 + 1) + 3
    assert lab.records == 3 * (3 + 5 + 1) + 3
    assert lab.pre_chain == 0 and report.open_runs == 0
    assert report.chain_since is not None


def test_writing_the_same_again_appends_nothing(store: HistoryStore) -> None:
    links = verify_store(store).links
    run = store.get_run("run-b")
    assert run is not None
    store.update_run("run-b", timeline=run.timeline, rto_seconds=run.rto_seconds)
    assert verify_store(store).links == links


def test_one_field_of_one_run_changed_in_the_database_is_named(store: HistoryStore) -> None:
    with db(store) as conn:
        conn.execute("UPDATE drill_runs SET rto_seconds = 1.0 WHERE id = 'run-b'")
    assert problem_of(verify_store(store)) == ("run", "run-b", "changed")


def test_a_deleted_timeline_step_is_named_removed(store: HistoryStore) -> None:
    with db(store) as conn:
        (raw,) = conn.execute("SELECT timeline FROM drill_runs WHERE id = 'run-b'").fetchone()
        timeline = json.loads(raw) if isinstance(raw, str) else raw  # PostgreSQL decodes it
        del timeline[0]["steps"][1]
        conn.execute(
            "UPDATE drill_runs SET timeline = ? WHERE id = 'run-b'", (json.dumps(timeline),)
        )
    report = verify_store(store)
    assert problem_of(report) == ("step", "run-b/0.1", "removed")
    assert report.first_problem is not None and report.first_problem.label == "fence / step 1"


def test_a_step_inserted_in_the_middle_is_named_inserted(store: HistoryStore) -> None:
    with db(store) as conn:
        (raw,) = conn.execute("SELECT timeline FROM drill_runs WHERE id = 'run-a'").fetchone()
        timeline = json.loads(raw) if isinstance(raw, str) else raw  # PostgreSQL decodes it
        forged = {**timeline[0]["steps"][0], "name": "forged", "result": "all good"}
        timeline[0]["steps"].insert(2, forged)
        conn.execute(
            "UPDATE drill_runs SET timeline = ? WHERE id = 'run-a'", (json.dumps(timeline),)
        )
    assert problem_of(verify_store(store)) == ("step", "run-a/0.2", "inserted")


def test_a_run_row_inserted_between_sealed_runs_is_named_inserted(store: HistoryStore) -> None:
    with db(store) as conn:
        conn.execute(
            "INSERT INTO drill_runs (id, plan, plan_digest, mode, dry_run, operator, reason,"
            " status, started_at, finished_at, rpo_seconds, verdict, timeline, readiness,"
            " details) VALUES ('forged', 'lab', 'x', 'drill', false, 'bob', '', 'succeeded',"
            " '2026-03-01 09:01:30.000000', '2026-03-01 09:02:00.000000', '{}', 'met', '[]',"
            " '{}', '{}')"
        )
    report = verify_store(store)
    assert problem_of(report) == ("run", "forged", "inserted")
    assert report.first_problem is not None and report.first_problem.seq is not None


def test_a_run_row_added_after_the_last_is_unchained(store: HistoryStore) -> None:
    with store.session() as s:  # not through create_run: no link
        s.add(
            DrillRun(
                id="late", plan="lab", plan_digest="x", mode=Mode.DRILL, operator="bob",
                status=RunStatus.SUCCEEDED, started_at=T0 + dt.timedelta(days=1),
                finished_at=T0 + dt.timedelta(days=1, minutes=1),
            )
        )  # fmt: skip
    assert problem_of(verify_store(store)) == ("run", "late", "unchained")


def test_journal_rows_changed_or_deleted_are_named(store: HistoryStore) -> None:
    with db(store) as conn:
        conn.execute("UPDATE journal SET state = 'undone' WHERE run_id = 'run-c' AND seq = 2")
    assert problem_of(verify_store(store)) == ("journal", "run-c/2", "changed")
    with db(store) as conn:
        conn.execute("UPDATE journal SET state = 'applied' WHERE run_id = 'run-c' AND seq = 2")
        conn.execute("DELETE FROM journal WHERE run_id = 'run-a' AND seq = 3")
    assert problem_of(verify_store(store)) == ("journal", "run-a/3", "removed")


def test_readiness_and_audit_rows_are_sealed(store: HistoryStore) -> None:
    with db(store) as conn:
        conn.execute("UPDATE audit_log SET who = 'mallory'")
    assert problem_of(verify_store(store))[::2] == ("audit", "changed")
    with db(store) as conn:
        conn.execute("UPDATE audit_log SET who = 'alice'")
        conn.execute("DELETE FROM readiness_snapshots WHERE NOT ok")
    assert problem_of(verify_store(store))[::2] == ("readiness", "removed")


def test_the_chain_itself_cannot_be_edited_quietly(store: HistoryStore) -> None:
    with db(store) as conn:
        conn.execute("DELETE FROM evidence_chain WHERE seq = 7")
    report = verify_store(store)
    assert report.first_problem is not None
    assert (report.first_problem.kind, report.first_problem.what) == ("chain", "removed")
    assert report.first_problem.key == "7"


def test_a_link_rewritten_to_match_an_edit_breaks_the_chain(store: HistoryStore) -> None:
    """Pointing a link at edited content changes the link's own hash: it shows."""
    with db(store) as conn:
        conn.execute("UPDATE drill_runs SET operator = 'mallory' WHERE id = 'run-a'")
        conn.execute(
            "UPDATE evidence_chain SET content_sha256 = ? WHERE kind = 'run'"
            " AND record_key = 'run-a'",
            ("0" * 64,),
        )
    report = verify_store(store)
    assert report.first_problem is not None
    assert (report.first_problem.kind, report.first_problem.what) == ("chain", "changed")


def test_an_open_run_is_open_not_tampered(history: HistoryStore) -> None:
    record_drill(history, "running", finish=False)
    report = verify_store(history)
    assert report.ok, report.first_problem
    assert report.open_runs == 1
    history.update_run("running", status=RunStatus.SUCCEEDED, finished_at=T0 + dt.timedelta(1))
    report = verify_store(history)
    assert report.ok and report.open_runs == 0
    # Sealed once, a run made to look open again is changed, not open.
    with db(history) as conn:
        conn.execute("UPDATE drill_runs SET finished_at = NULL")
    assert problem_of(verify_store(history)) == ("run", "running", "changed")


def test_a_run_written_again_after_it_finished_gets_a_new_link(store: HistoryStore) -> None:
    """`drills recover` writes a finished run again: the newest link is what it must hold."""
    store.update_run("run-a", status=RunStatus.RECOVERED, error=None)
    assert verify_store(store).ok
    kinds = [link.kind for link in run_evidence(store, "run-a")]
    assert kinds.count("run") == 2 and kinds.count("step") == 5 and kinds.count("journal") == 6


def test_run_evidence_lists_a_runs_links_in_chain_order(store: HistoryStore) -> None:
    links = run_evidence(store, "run-b")
    assert [link.seq for link in links] == sorted(link.seq for link in links)
    assert links[-1].kind == "run" and links[-1].key == "run-b"
    assert all(link.plan == "lab" and not link.pre_chain for link in links)
    assert links[0].to_json()["chained_at"].endswith("+00:00")


def test_digests_are_canonical() -> None:
    a = {"b": 1, "a": dt.datetime(2026, 1, 1, 10, tzinfo=dt.timezone(dt.timedelta(hours=2)))}
    assert canonical_json(a) == '{"a":"2026-01-01T08:00:00+00:00","b":1}'
    assert record_digest(a) == record_digest({**a, "added_later": None})
    assert entry_digest(GENESIS, "lab", 1, "run", "r", "x", False) != entry_digest(
        GENESIS, "lab", 1, "run", "r", "x", True
    )


def test_plans_have_chains_of_their_own(store: HistoryStore) -> None:
    record_drill(store, "other-1", plan="other")
    report = verify_store(store)
    assert report.ok
    assert {p.plan: p.records for p in report.plans}["other"] == 3 + 5 + 1


# -- concurrent writers ----------------------------------------------------------------------
def test_readiness_and_a_drill_writing_at_once_keep_one_gapless_chain(db_url: str) -> None:
    """Separate stores (engines) like separate processes, on one database."""
    url = db_url
    HistoryStore(url).close()  # made once: creating the tables is not what races here
    errors: list[BaseException] = []

    def readiness() -> None:
        store = HistoryStore(url)
        try:
            for i in range(40):
                store.save_readiness("lab", T0 + dt.timedelta(seconds=i), True, 0, {"i": i})
                store.audit(who="ui", action="view", plan="lab", accepted=True, reason=str(i))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            store.close()

    def drills(prefix: str) -> None:
        store = HistoryStore(url)
        try:
            for i in range(4):
                record_drill(store, f"{prefix}-{i}")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            store.close()

    threads = [
        threading.Thread(target=readiness),
        threading.Thread(target=readiness),
        threading.Thread(target=drills, args=("d1",)),
        threading.Thread(target=drills, args=("d2",)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    store = HistoryStore(url)
    try:
        report = verify_store(store)
        assert report.ok, report.first_problem
        [lab] = report.plans
        assert lab.links == 2 * 80 + 8 * (6 + 5 + 1)
        with db(store) as conn:
            seqs = [s for (s,) in conn.execute("SELECT seq FROM evidence_chain ORDER BY seq")]
        assert seqs == list(range(1, lab.links + 1))
    finally:
        store.close()


# -- stores older than the chain ------------------------------------------------------------
def _old_store(path: Path) -> str:
    """A store as the version before the chain left it: no chain tables, some records."""
    url = f"sqlite:///{path}"
    store = HistoryStore(url)
    store.close()
    as_before_migrations(url)
    with RawDatabase(url) as conn:
        conn.execute("DROP TABLE evidence_chain")
        conn.execute("DROP TABLE evidence_meta")
        conn.execute(
            "INSERT INTO drill_runs (id, plan, plan_digest, mode, dry_run, operator, reason,"
            " status, started_at, finished_at, rpo_seconds, verdict, timeline, readiness,"
            " details) VALUES ('old1', 'lab', 'x', 'drill', 0, 'bob', 'quarterly',"
            " 'succeeded', '2025-01-01 00:00:00', '2025-01-01 00:10:00', '{}', 'met', ?,"
            " '{}', '{\"ticket\": \"INC-42\"}')",
            (json.dumps(_timeline(2)),),
        )
        conn.execute(
            "INSERT INTO journal (run_id, seq, step, target, original, intended, state,"
            " created_at, updated_at) VALUES ('old1', 1, 'workload.scale',"
            " 'dr/Deployment/serving/llm', '{\"replicas\": 0}', '{\"replicas\": 2}',"
            " 'undone', '2025-01-01 00:00:01', '2025-01-01 00:00:02')"
        )
        conn.execute(
            "INSERT INTO readiness_snapshots (plan, checked_at, ok, blocking, report)"
            " VALUES ('lab', '2025-01-01 00:00:00', 1, 0, '{}')"
        )
        conn.execute(
            "INSERT INTO audit_log (at, who, action, plan, accepted, reason, detail)"
            " VALUES ('2025-01-01 00:00:00', 'alice', 'declare', 'lab', 1, 'drill', '{}')"
        )
    return url


def test_an_old_store_is_upgraded_in_place_its_records_marked_pre_chain(tmp_path: Path) -> None:
    url = _old_store(tmp_path / "old.db")
    before = dt.datetime.now(dt.UTC)
    with pytest.raises(SchemaError, match="drills db upgrade"):
        HistoryStore(url)
    schema.upgrade(make_engine(url))  # as `drills db upgrade` does: the chain too, only there
    store = HistoryStore(url)
    try:
        report = verify_store(store)
        assert report.ok, report.first_problem
        assert report.chain_since is not None and report.chain_since >= before
        # the run, its 3 ended steps, its journal entry, a snapshot and an audit event
        assert report.pre_chain == 1 + 3 + 1 + 1 + 1
        assert all(link.pre_chain for link in run_evidence(store, "old1"))
        record_drill(store, "new-1")
        report = verify_store(store)
        assert report.ok and report.pre_chain == 7
        assert not any(link.pre_chain for link in run_evidence(store, "new-1"))
        # Opened again: not upgraded twice.
        HistoryStore(url).close()
        assert verify_store(store).pre_chain == 7
        with db(store) as conn:
            conn.execute("UPDATE drill_runs SET operator = 'mallory' WHERE id = 'old1'")
        problem = verify_store(store).first_problem
        assert problem is not None and (problem.key, problem.what) == ("old1", "changed")
        assert "at the store's upgrade" in problem.detail
    finally:
        store.close()
