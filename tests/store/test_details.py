"""Runs written before the typed details and enums read the same, and keep what they held."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select, text

from drills.store.details import Approval, RecoverAttempt
from drills.store.history import HistoryStore
from drills.store.kinds import EntryState, Mode, RunStatus, Verdict
from drills.store.models import DrillRun, details_value
from drills.store.report import report_data

# As an older version wrote them: no "planned" or "recover" yet, a key this one does not
# know, and a measurement with only some of today's fields.
OLD_DETAILS = {
    "approval": {"approved": True, "approver": "lead-sre", "comment": "go"},
    "unfenced": False,
    "plan_path": "/plans/lab.yaml",
    "snapshot_before": {"dr/Deployment/serving/llm": {"replicas": 0}},
    "measurement": {"rto_target_seconds": 300.0, "rpo_target_seconds": 900.0, "verdict": "met"},
    "ticket": "INC-42",
}


@pytest.fixture()
def store(history: HistoryStore) -> HistoryStore:
    """The shared empty store, holding one run as an older version wrote it."""
    store = history
    with store.session() as s:
        s.execute(
            text(
                "INSERT INTO drill_runs (id, plan, plan_digest, mode, dry_run, operator, reason,"
                " status, started_at, finished_at, rpo_seconds, verdict, timeline, readiness,"
                " details) VALUES ('old1', 'lab', 'x', 'drill', false, 'bob', 'quarterly',"
                " 'succeeded', '2025-01-01 00:00:00', '2025-01-01 00:10:00', '{}', 'met', '[]',"
                " '{}', :details)"
            ),
            {"details": json.dumps(OLD_DETAILS)},
        )
        s.execute(
            text(
                "INSERT INTO journal (run_id, seq, step, target, original, intended, state,"
                " created_at, updated_at) VALUES ('old1', 1, 'workload.scale',"
                " 'dr/Deployment/serving/llm', '{\"replicas\": 0}', '{\"replicas\": 2}',"
                " 'undone', '2025-01-01 00:00:01', '2025-01-01 00:00:02')"
            )
        )
    return store


def test_an_old_run_reads_as_typed_values(store: HistoryStore) -> None:
    run = store.get_run("old1")
    assert run is not None
    assert run.mode is Mode.DRILL and run.status is RunStatus.SUCCEEDED
    assert run.verdict is Verdict.MET
    details = run.details
    assert details.approval == Approval(True, "lead-sre", "go")
    assert details.plan_path == "/plans/lab.yaml" and details.planned == []
    assert details.recover == [] and details.drift == {}
    assert details.measurement is not None and details.measurement.rto_target_seconds == 300.0
    assert details.measurement.rto_seconds is None
    [entry] = store.journal("old1")
    assert entry.kind == "workload.scale" and entry.state is EntryState.UNDONE


def test_writing_an_old_run_back_keeps_its_words_and_unknown_keys(store: HistoryStore) -> None:
    run = store.get_run("old1")
    assert run is not None
    attempt = RecoverAttempt(at=run.started_at, status=RunStatus.RECOVERED, action="rollback")
    store.update_run(
        "old1",
        status=RunStatus.RECOVERED,
        details=run.details.model_copy(update={"recover": [attempt]}),
    )
    with store.session() as s:
        status, raw = s.execute(text("SELECT status, details FROM drill_runs")).one()
    stored = json.loads(raw) if isinstance(raw, str) else raw  # PostgreSQL decodes JSON
    assert status == "recovered" and stored["ticket"] == "INC-42"
    assert stored["recover"][0]["status"] == "recovered"
    assert stored["recover"][0]["at"] == "2025-01-01T00:00:00+00:00"
    assert stored["measurement"]["rto_target_seconds"] == 300.0


def test_the_report_shows_an_old_run_as_it_was_recorded(store: HistoryStore) -> None:
    run = store.get_run("old1")
    assert run is not None
    data = report_data(run, store)
    assert data["measurement"] == OLD_DETAILS["measurement"]
    assert data["approval"] == OLD_DETAILS["approval"]
    assert data["journal"] == [
        {"seq": 1, "change": "workload.scale", "target": "dr/Deployment/serving/llm",
         "original": {"replicas": 0}, "intended": {"replicas": 2}, "state": "undone"}
    ]  # fmt: skip
    assert json.loads(json.dumps(data, default=str))["run"]["status"] == "succeeded"


def test_sql_reads_a_details_field_by_its_checked_path(store: HistoryStore) -> None:
    target = details_value("measurement", "rto_target_seconds").as_float()
    with store.session() as s:
        assert s.execute(select(DrillRun.id, target)).all() == [("old1", 300.0)]
    with pytest.raises(KeyError, match=r"measurement\.rto_target is not a field"):
        details_value("measurement", "rto_target")
