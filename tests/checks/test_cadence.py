"""drill.cadence against a real SQLite history store of each test's own."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest

import drills.checks.areas.cadence  # noqa: F401 - registers the check
from drills.checks.base import Status
from drills.plan import DrillPlan, plan_from_text
from drills.store.history import HistoryStore
from drills.store.models import DrillRun
from tests.support.checks import run_check
from tests.support.drill import offline_lab_plan_text

NOW = dt.datetime(2025, 6, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def plan() -> DrillPlan:
    return plan_from_text(offline_lab_plan_text())


def add_run(
    history: HistoryStore,
    *,
    days_ago: float,
    status: str = "succeeded",
    plan: str = "lab",
    mode: str = "drill",
    dry_run: bool = False,
) -> str:
    started = NOW - dt.timedelta(days=days_ago)
    run_id = f"run-{uuid.uuid4().hex[:12]}"
    with history.session() as session:
        session.add(
            DrillRun(
                id=run_id,
                plan=plan,
                plan_digest="sha256:" + "0" * 64,
                mode=mode,
                dry_run=dry_run,
                operator="sre@example.com",
                reason="quarterly drill",
                status=status,
                started_at=started,
                t0=started,
                restored_at=started + dt.timedelta(minutes=4),
                finished_at=started + dt.timedelta(minutes=30),
                rto_seconds=240.0,
                client_rto_seconds=270.0,
                rpo_seconds={"checkpoints": 300.0},
                verdict="met" if status == "succeeded" else "missed",
                timeline=[],
                readiness={},
                details={},
                flow_run_id=None,
                error=None if status == "succeeded" else "smoke probe failed",
            )
        )
    return run_id


def test_never_drilled_fails_without_blocking(plan: DrillPlan, history: HistoryStore) -> None:
    result = run_check(plan, "drill.cadence", history=history, now=NOW)
    assert result.status is Status.FAIL and not result.blocking
    assert result.summary == "plan lab has never been drilled successfully"
    assert result.evidence["last_run_id"] is None
    assert result.remediation


def test_drill_ten_days_ago_passes(plan: DrillPlan, history: HistoryStore) -> None:
    run_id = add_run(history, days_ago=10)
    result = run_check(plan, "drill.cadence", history=history, now=NOW)
    assert result.status is Status.PASS, result.summary
    assert result.evidence["last_run_id"] == run_id
    assert result.evidence["age_days"] == pytest.approx(10, abs=0.1)
    assert result.evidence["last_drill_at"].startswith("2025-05-22")
    assert run_id in result.summary


def test_drill_a_hundred_days_ago_fails(plan: DrillPlan, history: HistoryStore) -> None:
    run_id = add_run(history, days_ago=100)
    result = run_check(plan, "drill.cadence", history=history, now=NOW)
    assert result.status is Status.FAIL and not result.blocking
    assert "over 92 days" in result.summary
    assert result.evidence["last_run_id"] == run_id
    assert result.evidence["age_days"] == pytest.approx(100, abs=0.1)


@pytest.mark.parametrize(
    "recent",
    [
        {"status": "failed"},
        {"dry_run": True},
        {"mode": "incident"},
        {"mode": "practice"},  # never fences the primary nor switches the record
        {"plan": "another-plan"},
    ],
    ids=["failed", "dry-run", "incident", "practice", "other-plan"],
)
def test_only_a_succeeded_real_drill_of_this_plan_counts(
    plan: DrillPlan, history: HistoryStore, recent: dict[str, Any]
) -> None:
    old = add_run(history, days_ago=100)
    add_run(history, days_ago=1, **recent)
    result = run_check(plan, "drill.cadence", history=history, now=NOW)
    assert result.status is Status.FAIL
    assert result.evidence["last_run_id"] == old


def test_the_newest_success_counts(plan: DrillPlan, history: HistoryStore) -> None:
    add_run(history, days_ago=200)
    newest = add_run(history, days_ago=30)
    add_run(history, days_ago=100)
    result = run_check(plan, "drill.cadence", history=history, now=NOW)
    assert result.status is Status.PASS
    assert result.evidence["last_run_id"] == newest


def test_without_a_history_store_it_warns(plan: DrillPlan) -> None:
    result = run_check(plan, "drill.cadence", history=None, now=NOW)
    assert result.status is Status.WARN and not result.blocking
    assert "no history store" in result.summary


def test_a_broken_store_is_an_error(plan: DrillPlan, history: HistoryStore) -> None:
    with history.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE drill_runs")
    result = run_check(plan, "drill.cadence", history=history, now=NOW)
    assert result.status is Status.ERROR and result.blocking
    # The driver's word for a missing table: SQLite's and psycopg's differ.
    assert result.summary in {
        f"cannot read history store {history.url}: {error}"
        for error in ("OperationalError", "ProgrammingError")
    }
