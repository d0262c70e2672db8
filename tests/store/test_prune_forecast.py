"""The RTO forecast reads what a prune keeps: the same before and after `drills db prune`."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from drills.store.history import HistoryStore, SnapshotRow
from drills.store.models import DrillRun
from drills_lab.runtime import LabInfo
from tests.support.drill import drills_cli

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)
EVERY = dt.timedelta(hours=6)
PLAN = "lab"  # the lab's plan: the forecast reads its sites too


def _lag(at: dt.datetime) -> float:
    """A replication lag that changes with every result, so only the newest one fits."""
    return float(int(at.timestamp()) % 977)


def _report(at: dt.datetime) -> dict[str, Any]:
    rpo = {"id": "data.rpo", "title": "RPO", "category": "Data", "status": "pass",
           "blocking": False, "summary": "within target",
           "evidence": {"datasets": [{"name": "checkpoints", "lag_s": _lag(at)}]}}  # fmt: skip
    return {"plan": PLAN, "checked_at": at.isoformat(), "results": [rpo]}


def _timeline(t0: dt.datetime, rto: float) -> list[dict[str, Any]]:
    """A drill's phases from T0, bring-up with its tier steps, as the forecast reads them."""
    spans = {"fence": 0.15, "bring-up": 0.55, "dns": 0.2, "smoke": 0.1}
    phases, at = [], t0
    for name, share in spans.items():
        end = at + dt.timedelta(seconds=rto * share)
        steps = []
        if name == "bring-up":
            steps = [{"name": "critical: serving/llm-server → 1", "status": "ok",
                      "seconds": rto * share, "ended_at": end.isoformat()}]  # fmt: skip
        phases.append({"name": name, "seconds": rto * share, "started_at": at.isoformat(),
                       "ended_at": end.isoformat(), "steps": steps})  # fmt: skip
        at = end
    return phases


def _fill(store: HistoryStore, last_readiness: dt.datetime) -> None:
    """240 days of readiness every 6 h up to ``last_readiness``; drills over 300 days, the
    ones of the last 90 days what the forecast learns from."""
    at = NOW - dt.timedelta(days=240)
    snapshots: list[SnapshotRow] = []
    while at <= last_readiness:
        snapshots.append((PLAN, at, True, 0, _report(at)))
        at += EVERY
    store.save_readiness_many(snapshots)  # each sealed in the chain, in one transaction
    for days_ago, rto in ((300, 240.0), (200, 200.0), (80, 150.0), (40, 130.0), (3, 110.0)):
        started = NOW - dt.timedelta(days=days_ago)
        store.create_run(
            DrillRun(id=f"drill-{days_ago}", plan=PLAN, plan_digest="0" * 64, mode="drill",
                     operator="bob", reason="quarterly", status="succeeded", started_at=started,
                     t0=started, finished_at=started + dt.timedelta(seconds=rto * 3),
                     rto_seconds=rto, verdict="met", timeline=_timeline(started, rto))
        )  # fmt: skip


def _forecast(lab: LabInfo, db: str) -> dict[str, Any]:
    done = drills_cli("forecast", str(Path(lab.state_dir) / "plan.yaml"), "--json", db=db)
    assert done.returncode in (0, 1), done.stderr
    return dict(json.loads(done.stdout))


@pytest.mark.parametrize("stopped_days_ago", [0, 200], ids=["readiness-now", "readiness-stopped"])
def test_the_forecast_is_the_same_before_and_after_a_prune(
    lab: LabInfo, history: HistoryStore, stopped_days_ago: int
) -> None:
    """Readiness running until now, or stopped 200 days ago (its newest result is then
    older than the cutoff, and kept as the plan's newest)."""
    last = NOW - dt.timedelta(days=stopped_days_ago)
    _fill(history, last)
    before = _forecast(lab, history.url)
    newest = history.latest_readiness(PLAN)
    assert newest is not None
    at = newest.checked_at if newest.checked_at.tzinfo else newest.checked_at.replace(tzinfo=dt.UTC)
    assert before["state"]["replication_lag_seconds"] == _lag(at)  # read from the store
    assert before["drills"] == 3, before  # the drills of the last 90 days

    pruned = drills_cli("db", "prune", "--older-than", "180d", "--json", db=history.url)
    assert pruned.returncode == 0, pruned.stderr
    assert json.loads(pruned.stdout)["removed"] > 100  # a real thinning, not a no-op

    assert _forecast(lab, history.url) == before
