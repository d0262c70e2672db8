"""The dashboard's history page with 5,000 runs in the store, measured with AppTest.

The store holds 5,000 finished runs of three plans over five years, each with what a
real run writes: a timeline of nine phases with steps and evidence, the readiness
snapshot at T0 (17 checks), the measurement, and ten journal entries. Then, in
AppTest (the app's own script runner, no browser):

- first render of the history page, with Streamlit's data cache empty: the table's
  first page, the RTO trend of the latest 200 runs, and the newest run's detail
  (report, Gantt chart, journal, readiness). Goal ≤ 1.0 s.
- a filter change (mode, then verdict, then plan): goal ≤ 0.3 s each.
- the next page: reported, no goal.

Figures are medians of five sessions: wall time, which the goals apply to, and the
process's CPU time beside it (on a shared machine the wall time also holds the waits
for a CPU; the load average is printed). Imports are paid once per server process, not
per page view, so they are reported apart and not counted. The app runs as `drills ui`
starts it (magic off).
"""

from __future__ import annotations

import datetime as dt
import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import app_test

RUNS = 5_000
PLANS = ("gpu-platform", "lab", "batch-cluster")
SESSIONS = 5
GOAL_FIRST_S = 1.0
GOAL_FILTER_S = 0.3
ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "ui" / "streamlit_app.py"
PHASES = ("preflight", "declare", "fence", "bring-up", "dns", "smoke", "measure", "failback",
          "verify failback")  # fmt: skip
CATEGORIES = ("Images", "Data", "Secrets", "Cluster", "DNS", "Cadence")


def _timeline(start: dt.datetime, rnd: random.Random) -> list[dict[str, Any]]:
    """Nine phases of three steps each, shaped as drills.takeover.timeline writes them."""
    phases, at = [], start
    for name in PHASES:
        phase_start, steps = at, []
        for i in range(3):
            seconds = rnd.uniform(0.05, 2.0)
            steps.append(
                {
                    "name": f"{name} step {i}",
                    "started_at": at.isoformat(),
                    "ended_at": (at + dt.timedelta(seconds=seconds)).isoformat(),
                    "seconds": round(seconds, 3),
                    "status": "ok",
                    "result": f"{name} step {i} done",
                    "evidence": {"targets": [f"serving/workload-{j}" for j in range(4)]},
                }
            )
            at += dt.timedelta(seconds=seconds)
        phases.append(
            {
                "name": name,
                "started_at": phase_start.isoformat(),
                "ended_at": at.isoformat(),
                "seconds": round((at - phase_start).total_seconds(), 3),
                "status": "ok",
                "steps": steps,
            }
        )
    return phases


def _readiness(plan: str, at: dt.datetime) -> dict[str, Any]:
    results = [
        {
            "id": f"{CATEGORIES[i % 6].lower()}.check{i}",
            "title": f"Check {i}",
            "category": CATEGORIES[i % 6],
            "status": "pass",
            "blocking": False,
            "summary": f"all {i + 3} things fine",
            "evidence": {"examples": [f"item-{j}" for j in range(5)], "count": i + 3},
            "duration_s": 0.12,
            "remediation": "",
        }
        for i in range(17)
    ]
    return {"plan": plan, "checked_at": at.isoformat(timespec="seconds"), "results": results}


def fill(db_url: str) -> None:
    """5,000 runs and their journals, inserted in bulk."""
    from drills.store.bulk import load
    from drills.store.history import HistoryStore
    from drills.store.models import DrillRun, JournalEntry

    store = HistoryStore(db_url)
    rnd = random.Random(5000)
    begin = dt.datetime(2021, 1, 1, tzinfo=dt.UTC)
    runs, journal = [], []
    for n in range(RUNS):
        started = begin + dt.timedelta(hours=n * 8.7)
        mode = "incident" if rnd.random() < 0.1 else "drill"
        verdict = rnd.choices(["met", "missed", "failed", "aborted"], [80, 8, 8, 4])[0]
        measured = verdict in ("met", "missed")
        rto = rnd.uniform(20, 280) if verdict == "met" else rnd.uniform(310, 900)
        run_id = uuid.UUID(int=rnd.getrandbits(128)).hex[:12]
        plan = PLANS[n % len(PLANS)]
        runs.append(
            {
                "id": run_id, "plan": plan, "plan_digest": "0" * 64, "mode": mode,
                "dry_run": False, "operator": rnd.choice(["alice", "bob", "prefect"]),
                "reason": "quarterly drill", "status": "succeeded" if measured else verdict,
                "started_at": started, "t0": started + dt.timedelta(seconds=3),
                "restored_at": started + dt.timedelta(seconds=3 + rto) if measured else None,
                "finished_at": started + dt.timedelta(seconds=rto + 60),
                "rto_seconds": rto if measured else None,
                "client_rto_seconds": rto + 30 if measured else None,
                "rpo_seconds": {"training-data": 12.0, "checkpoints": 40.0} if measured else {},
                "verdict": verdict, "timeline": _timeline(started, rnd),
                "readiness": _readiness(plan, started),
                "details": {"measurement": {"rto_target_seconds": 300.0,
                                            "rpo_target_seconds": 900.0}} if measured else {},
                "flow_run_id": None, "error": None if measured else "something failed",
            }
        )  # fmt: skip
        journal += [
            {
                "run_id": run_id, "seq": seq, "kind": "workload.scale",
                "target": f"dr/Deployment/serving/workload-{seq}",
                "original": {"replicas": 0}, "intended": {"replicas": 2}, "state": "undone",
                "created_at": started, "updated_at": started,
            }
            for seq in range(1, 11)
        ]  # fmt: skip
    load(store, (DrillRun, [runs]), (JournalEntry, [journal]))
    store.close()


Timing = tuple[float, float]  # (wall, cpu) seconds


def _timed(action: Callable[[], Any]) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - wall, time.process_time() - cpu


def session() -> dict[str, Timing]:
    """One browser session's worth of history-page interactions, timed."""
    import streamlit as st
    from streamlit import config

    config.set_option("runner.magicEnabled", False)  # as `drills ui` runs it
    st.cache_data.clear()
    at = app_test(str(APP), 60)
    figures = {"first render": _timed(lambda: at.switch_page("app_pages/history.py").run())}
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.dataframe[0].value) == 25 and at.get("vega_lite_chart"), "page incomplete"
    for key, value in (("mode", "incident"), ("verdict", "met"), ("plan", "lab")):
        box = at.selectbox(key=f"history.{key}")

        def choose(box: Any = box, value: str = value) -> None:
            box.select(value).run()

        figures[f"filter {key}={value}"] = _timed(choose)
        assert not at.exception and len(at.dataframe[0].value) > 0
    older = next(b for b in at.button if b.label == "Older →")
    figures["next page"] = _timed(lambda: older.click().run())
    return figures


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-ui-") as tmp:
        db_url = f"sqlite:///{Path(tmp) / 'history.db'}"
        os.environ.update(
            DRILLS_DB_URL=db_url,
            PREFECT_API_URL="",
            DRILLS_PLANS=str(ROOT / "plans" / "gpu-platform.example.yaml"),
            STREAMLIT_BROWSER_GATHER_USAGE_STATS="false",
        )
        began = time.perf_counter()
        fill(db_url)
        size = (Path(tmp) / "history.db").stat().st_size / 1e6
        print(f"setup: {RUNS} runs and {RUNS * 10} journal entries in "
              f"{time.perf_counter() - began:.1f}s ({size:.0f} MB SQLite)")  # fmt: skip
        cold = session()["first render"][0]
        results = [session() for _ in range(SESSIONS)]
    names = list(results[0])
    goals = {"first render": GOAL_FIRST_S} | {
        n: GOAL_FILTER_S for n in names if n.startswith("filter")
    }
    load = os.getloadavg()[0]
    print(f"history page, AppTest, median of {SESSIONS} sessions "
          f"(load average {load:.1f} on {os.cpu_count()} CPUs):")  # fmt: skip
    print(f"  {'':<24}{'wall':>8}{'cpu':>9}   goal (wall)")
    failed = 0
    for name in names:
        wall = statistics.median(r[name][0] for r in results)
        cpu = statistics.median(r[name][1] for r in results)
        goal = goals.get(name)
        verdict = ""
        if goal is not None:
            ok = wall <= goal
            failed += not ok
            verdict = f"≤ {goal:.1f}s {'met' if ok else 'MISSED'}"
        runs = " ".join(f"{r[name][0]:.2f}" for r in results)
        print(f"  {name:<24}{wall:7.3f}s{cpu:8.3f}s   {verdict:<16} (wall: {runs})")
    print(f"  first render in a fresh process (imports included, once per server): {cold:.2f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
