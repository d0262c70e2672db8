"""The benchmarks' loader: rows in bulk, the load itself sealed as an audit event."""

from __future__ import annotations

import datetime as dt

from drills.store.audit import recent_events
from drills.store.bulk import BULK_PLAN, load, load_fast
from drills.store.chain_verify import verify_store
from drills.store.history import HistoryStore
from drills.store.models import DrillRun, ReadinessSnapshot

AT = dt.datetime(2026, 1, 5, 12, tzinfo=dt.UTC)


def _run(n: int) -> dict[str, object]:
    return {
        "id": f"bulk{n:04d}", "plan": f"app-{n % 3}", "plan_digest": "0" * 8, "mode": "drill",
        "dry_run": False, "operator": "bench", "reason": "", "status": "succeeded",
        "started_at": AT + dt.timedelta(hours=n),
        "finished_at": AT + dt.timedelta(hours=n, minutes=5),
        "timeline": [{"name": "failover", "status": "ok"}], "readiness": {}, "details": {},
        "rpo_seconds": {},
    }  # fmt: skip


def _snapshot(n: int) -> dict[str, object]:
    report = {"results": [{"id": "dns.record", "status": "pass"}]}
    return {"plan": "app-0", "checked_at": AT + dt.timedelta(minutes=n), "ok": True,
            "blocking": 0, "report": report}  # fmt: skip


def test_a_store_loaded_in_bulk_opens_and_says_what_was_loaded(history: HistoryStore) -> None:
    runs = [[_run(n) for n in range(0, 5)], [_run(n) for n in range(5, 7)]]
    load_fast(history, (ReadinessSnapshot, iter([[_snapshot(n) for n in range(4)]])),
              (DrillRun, iter(runs)))  # fmt: skip
    reopened = HistoryStore(history.url)  # refused if it held final records and no chain
    try:
        assert [r.id for r in reopened.list_runs(plan="app-1")] == ["bulk0004", "bulk0001"]
        snapshot = reopened.latest_readiness("app-0")
        assert snapshot is not None and snapshot.checked_at == AT + dt.timedelta(minutes=3)
        [event] = recent_events(reopened, ["bulk-load"], limit=5)
        assert (event.plan, event.accepted) == (BULK_PLAN, True)
        assert event.detail == {"rows": {"readiness_snapshots": 4, "drill_runs": 7}}
        report = verify_store(reopened)
        assert not report.ok  # the rows are a stand-in, never evidence
    finally:
        reopened.close()


def test_load_writes_every_table_in_one_transaction(history: HistoryStore) -> None:
    load(history, (DrillRun, [[_run(1)], [_run(2)]]))
    assert {r.id for r in history.list_runs()} == {"bulk0001", "bulk0002"}
    [event] = recent_events(history, ["bulk-load"], limit=5)
    assert event.reason == "2 rows written in bulk, unsealed"
