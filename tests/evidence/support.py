"""Runs written straight into a history store: the shapes a drill records, without a lab."""

from __future__ import annotations

import datetime as dt
from typing import Any

from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus, Verdict
from drills.store.models import DrillRun

BASE = dt.datetime(2026, 1, 5, 9, 0, tzinfo=dt.UTC)


def check(check_id: str, status: str, remediation: str = "") -> dict[str, Any]:
    return {
        "id": check_id, "title": f"check {check_id}", "category": "data", "status": status,
        "blocking": status in ("fail", "error"), "summary": f"{check_id} is {status}",
        "evidence": {}, "duration_s": 0.1, "remediation": remediation,
    }  # fmt: skip


def phase(name: str, *steps: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "name": name, "started_at": BASE.isoformat(), "ended_at": BASE.isoformat(),
        "seconds": 1.0, "status": "failed" if any(s[1] == "failed" for s in steps) else "ok",
        "steps": [
            {"name": n, "status": st, "result": result, "seconds": 0.5, "evidence": {},
             "started_at": BASE.isoformat(), "ended_at": BASE.isoformat()}
            for n, st, result in steps
        ],
    }  # fmt: skip


def make_run(
    run_id: str,
    *,
    plan: str = "payments-eu",
    days: float = 0,
    mode: Mode = Mode.DRILL,
    status: RunStatus = RunStatus.SUCCEEDED,
    checks: list[dict[str, Any]] | None = None,
    phases: list[dict[str, Any]] | None = None,
    dry_run: bool = False,
) -> DrillRun:
    started = BASE + dt.timedelta(days=days)
    ok = status is RunStatus.SUCCEEDED
    return DrillRun(
        id=run_id, plan=plan, plan_digest="sha256:" + "0" * 64, mode=mode, dry_run=dry_run,
        operator="alice", reason="quarterly drill", status=status, started_at=started,
        t0=started, restored_at=started + dt.timedelta(seconds=40),
        finished_at=started + dt.timedelta(minutes=3), rto_seconds=40.0 if ok else None,
        client_rto_seconds=70.0 if ok else None, rpo_seconds={"models": 3.0} if ok else {},
        verdict=Verdict.MET if ok else Verdict.FAILED,
        timeline=phases if phases is not None else [phase("failback", ("restore", "ok", "done"))],
        readiness={"results": checks or []}, details={},
    )  # fmt: skip


def store_with(tmp_path: Any, *runs: DrillRun) -> HistoryStore:
    store = HistoryStore(f"sqlite:///{tmp_path}/history.db")
    for run in runs:
        store.create_run(run)
    return store
