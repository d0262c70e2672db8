"""The dashboard's own queries, on SQLite and on PostgreSQL: paging, filters, the RTO trend's
JSON target, the plans, the audit trail."""

from __future__ import annotations

import datetime as dt

from drills.store.details import MeasurementRecord, RunDetails
from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus, Verdict
from drills.store.models import DrillRun
from ui.queries import last_run, recent_audit, rto_points, run_for_flow_run, run_plans, runs_page

T0 = dt.datetime(2026, 5, 1, 8, 0, tzinfo=dt.UTC)


def add_run(store: HistoryStore, n: int, *, plan: str = "lab", mode: Mode = Mode.DRILL,
            verdict: Verdict = Verdict.MET, dry_run: bool = False) -> None:  # fmt: skip
    started = T0 + dt.timedelta(hours=n)
    store.create_run(
        DrillRun(
            id=f"run-{n:02d}", plan=plan, plan_digest="sha256:x", mode=mode, dry_run=dry_run,
            operator="alice", status=RunStatus.SUCCEEDED, started_at=started,
            finished_at=started + dt.timedelta(minutes=5), verdict=verdict, rto_seconds=60.0 + n,
            flow_run_id=f"flow-{n}",
            details=RunDetails(measurement=MeasurementRecord(rto_target_seconds=300.0 + n)),
        )
    )  # fmt: skip


def test_runs_page_filters_and_pages_newest_first(history: HistoryStore) -> None:
    for n in range(7):
        add_run(history, n, verdict=Verdict.FAILED if n == 3 else Verdict.MET)
    add_run(history, 7, plan="other", mode=Mode.INCIDENT)
    rows, more = runs_page(history, plan="lab", mode=None, verdict=None, page=0, size=4)
    assert [r.id for r in rows] == ["run-06", "run-05", "run-04", "run-03"] and more
    rows, more = runs_page(history, plan="lab", mode=None, verdict=None, page=1, size=4)
    assert [r.id for r in rows] == ["run-02", "run-01", "run-00"] and not more
    rows, _ = runs_page(history, plan=None, mode=None, verdict="failed", page=0, size=10)
    assert [r.id for r in rows] == ["run-03"] and rows[0].rto_target == 303.0
    rows, _ = runs_page(history, plan=None, mode="incident", verdict=None, page=0, size=10)
    assert [r.plan for r in rows] == ["other"]


def test_rto_points_read_the_target_in_sql_and_leave_dry_runs_out(history: HistoryStore) -> None:
    for n in range(3):
        add_run(history, n)
    add_run(history, 3, dry_run=True)
    points = rto_points(history, plan="lab", mode="drill", limit=2)
    assert [(p.id, p.rto_seconds, p.rto_target) for p in points] == [
        ("run-01", 61.0, 301.0), ("run-02", 62.0, 302.0)
    ]  # fmt: skip


def test_plans_last_run_flow_run_and_audit(history: HistoryStore) -> None:
    add_run(history, 0, plan="b")
    add_run(history, 1, plan="a")
    add_run(history, 2, plan="a", mode=Mode.INCIDENT)
    assert run_plans(history) == ["a", "b"]
    last = last_run(history, "a", mode="drill")
    assert last is not None and last.id == "run-01"
    found = run_for_flow_run(history, "flow-2", "a", None)
    assert found is not None and found.id == "run-02"
    for who, accepted in (("alice", True), ("mallory", False)):
        history.audit(who=who, action="declare", plan="a", accepted=accepted, reason="x",
                      detail={"outcome": "started" if accepted else "refused"})  # fmt: skip
    history.audit(who="bob", action="cancel", plan="a", accepted=True, reason="y")
    rows = recent_audit(history, ["declare"])
    assert [(r.who, r.accepted, r.outcome) for r in rows] == [
        ("mallory", False, "refused"), ("alice", True, "started")
    ]  # fmt: skip
