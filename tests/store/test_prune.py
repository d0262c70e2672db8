"""`drills db prune`: old readiness results thinned out, everything else and the chain intact."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from typing import Any

import pytest
from sqlalchemy import func, select, update

from drills.store import chain_verify
from drills.store.history import HistoryStore, SnapshotRow
from drills.store.models import (
    AuditEvent,
    DrillRun,
    EvidenceEntry,
    JournalEntry,
    PrunedRecord,
    ReadinessSnapshot,
)
from tests.metrics.test_exporter import scrape
from tests.support.cli import drills_process
from tests.support.ui import EXAMPLE_PLAN, UiEnv, add_run, open_page, shown

PLAN = "gpu-platform"
NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)
MIDNIGHT = NOW.replace(hour=0, minute=0, second=0)
EVERY = dt.timedelta(hours=6)
DAYS = 240


def _status(check: str, at: dt.datetime) -> str:
    """images.present fails from noon 200 days ago to noon 195 days ago; data.rpo warns
    from noon 190 days ago for a day. Samples fall at 03, 09, 15 and 21 UTC, so each change
    is seen at 15:00, never by a day's first sample, whatever the hour the test runs."""
    if check == "images.present":
        return "fail" if _noon(200) <= at < _noon(195) else "pass"
    return "warn" if _noon(190) <= at < _noon(189) else "pass"


def _noon(days_ago: int) -> dt.datetime:
    return MIDNIGHT - dt.timedelta(days=days_ago) + dt.timedelta(hours=12)


def _fill(store: HistoryStore) -> None:
    snapshots: list[SnapshotRow] = []
    for at in _times():
        results = [
            {"id": c, "title": c, "category": "Data", "status": _status(c, at),
             "blocking": False, "summary": _status(c, at)}
            for c in ("images.present", "data.rpo")
        ]  # fmt: skip
        failing = sum(r["status"] == "fail" for r in results)
        report = {"plan": PLAN, "checked_at": at.isoformat(), "results": results}
        snapshots.append((PLAN, at, not failing, failing, report))
    # Each sealed in the chain, in one transaction (960 of them, one a transaction, took
    # seconds of CPU per store).
    store.save_readiness_many(snapshots)
    add_run(store, plan=PLAN, rto_seconds=120.0, started_at=NOW - dt.timedelta(days=300))
    add_run(store, plan=PLAN, rto_seconds=90.0, started_at=NOW - dt.timedelta(days=3))
    store.audit(who="alice", action="drill", plan=PLAN, accepted=True, reason="quarterly")


def _counts(store: HistoryStore) -> dict[str, int]:
    with store.session() as s:
        return {
            model.__tablename__: s.scalar(select(func.count()).select_from(model)) or 0
            for model in (DrillRun, JournalEntry, AuditEvent, EvidenceEntry, ReadinessSnapshot)
        }


def _cli(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    return drills_process([*args, "--db", db], timeout=120)


def _views(ui_env: UiEnv, store: HistoryStore) -> dict[str, Any]:
    """What people see of the store: the history page, the readiness page, the metrics."""
    samples = scrape(store, [str(EXAMPLE_PLAN)])
    # Not the chain's length either: a prune adds its links (checked on its own below).
    moving = ("scrape", "due_in", "chain_length")
    samples = {k: v for k, v in samples.items() if not any(m in k[0] for m in moving)}
    return {
        "history": shown(open_page("history")),
        "readiness": shown(open_page()),
        "metrics": samples,
    }


def test_prune_keeps_changes_and_days_and_the_chain_verifies(ui_env: UiEnv) -> None:
    store = ui_env.store()
    _fill(store)
    before, seen = _counts(store), _views(ui_env, store)

    dry = _cli("db", "prune", "--older-than", "180d", "--dry-run", "--json", db=ui_env.db_url)
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)
    assert _counts(store) == before
    # About 60 days past the cutoff, 4 results a day: one a day stays, plus the changes.
    older = sum(at < NOW - dt.timedelta(days=180) for at in _times())
    assert planned["examined"] in (older, older + 1)  # the one at the cutoff, by the clock
    assert planned["removed"] == planned["examined"] - planned["kept"] > 150

    done = _cli("db", "prune", "--older-than", "180d", "--json", db=ui_env.db_url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["removed"] == planned["removed"]
    after = _counts(store)
    assert after["readiness_snapshots"] == before["readiness_snapshots"] - planned["removed"]
    for table in ("drill_runs", "journal", "audit_log"):
        assert after[table] == before[table]
    assert after["evidence_chain"] > before["evidence_chain"]  # prunes are sealed, none removed
    length = ("drills_evidence_chain_length", frozenset({("plan", PLAN)}))
    assert scrape(store, [str(EXAMPLE_PLAN)])[length] == after["evidence_chain"]

    with store.session() as s:
        kept = s.execute(
            select(ReadinessSnapshot.checked_at, ReadinessSnapshot.report).order_by(
                ReadinessSnapshot.checked_at
            )
        ).all()
    old = [(at, r) for at, r in kept if at < NOW - dt.timedelta(days=180)]
    days = {at.date() for at in _times() if at < NOW - dt.timedelta(days=180)}
    assert {at.date() for at, _ in old} == days  # one a day at least
    assert len(days) < len(old) <= len(days) + 4  # and the 4 status changes
    statuses = [tuple(x["status"] for x in r["results"]) for _, r in old]
    assert ("fail", "pass") in statuses and ("pass", "warn") in statuses

    assert _views(ui_env, store) == seen
    verified = _cli("evidence", "verify", db=ui_env.db_url)
    assert verified.returncode == 0, verified.stderr
    assert f"{planned['removed']} pruned, as sealed" in verified.stdout


def _times() -> list[dt.datetime]:
    at, found = MIDNIGHT - dt.timedelta(days=DAYS, hours=-3), []
    while at <= NOW:
        found.append(at)
        at += EVERY
    return found


def test_tampering_with_pruned_records_shows(history: HistoryStore) -> None:
    _fill(history)
    from drills.store.prune import prune_readiness

    prune_readiness(history, dt.timedelta(days=180), dry_run=False)
    assert chain_verify.verify_store(history).ok
    with history.session() as s:
        victim = s.scalars(select(PrunedRecord).limit(1)).one()
        s.execute(
            update(PrunedRecord).where(PrunedRecord.id == victim.id).values(content_sha256="0" * 64)
        )
    report = chain_verify.verify_store(history)
    found = {(p.kind, p.key, p.what) for p in report.problems}
    assert ("prune", found and next(k for kd, k, _ in found if kd == "prune"), "changed") in found
    assert ("readiness", victim.record_key, "changed") in found  # its hash is not the sealed one


def test_a_kept_snapshot_removed_is_still_tampering(history: HistoryStore) -> None:
    _fill(history)
    from drills.store.prune import prune_readiness

    prune_readiness(history, dt.timedelta(days=180), dry_run=False)
    with history.session() as s:
        oldest = s.scalars(select(ReadinessSnapshot).order_by(ReadinessSnapshot.id).limit(1)).one()
        s.delete(oldest)
    report = chain_verify.verify_store(history)
    assert report.first_problem is not None
    assert (report.first_problem.kind, report.first_problem.what) == ("readiness", "removed")


def test_bad_age_is_refused(history: HistoryStore) -> None:
    bad = _cli("db", "prune", "--older-than", "3h", db=history.url)
    assert bad.returncode == 2 and "at least 1d" in bad.stderr


def test_scheduled_prune_runs_once_a_day(history: HistoryStore) -> None:
    from drills.store.prune import prune_if_due

    _fill(history)
    first = prune_if_due(history, dt.timedelta(days=180), now=NOW)
    assert first is not None and first.total_removed > 150
    assert prune_if_due(history, dt.timedelta(days=180), now=NOW + dt.timedelta(hours=23)) is None
    again = prune_if_due(history, dt.timedelta(days=180), now=NOW + dt.timedelta(hours=25))
    assert again is not None and again.total_removed <= 5  # only the day that aged past it
    assert chain_verify.verify_store(history).ok


def test_a_failed_scheduled_prune_is_tried_again_and_one_caller_takes_the_day(
    history: HistoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from drills.store import prune

    _fill(history)

    def store_gone(*args: Any, **kwargs: Any) -> prune.PruneResult:
        raise RuntimeError("the store went away")

    with monkeypatch.context() as patched:
        patched.setattr(prune, "prune_readiness", store_gone)
        with pytest.raises(RuntimeError):
            prune.prune_if_due(history, dt.timedelta(days=180), now=NOW)
    done = prune.prune_if_due(history, dt.timedelta(days=180), now=NOW)  # the day given back
    assert done is not None and done.total_removed > 150
    # Two callers that both read the mark before either wrote it: one takes the day.
    later = NOW + dt.timedelta(days=2)
    assert prune._swap_mark(history, NOW.isoformat(), later.isoformat())
    assert not prune._swap_mark(history, NOW.isoformat(), later.isoformat())
