"""`drills metrics serve` with 200 plans and 100,000 runs in the store, scraped over HTTP.

The store holds, for 200 plans (copies of the example plan under other names):
500 runs each (100,000; a tenth incidents, some failed, some dry runs, a few left
unfinished), each with a timeline and the readiness snapshot at T0 as a real run keeps
them; and 50 readiness snapshots each (10,000) of 17 checks, with `data.rpo` evidence.

The exporter runs as `drills metrics serve` does, in its own process. Reported: the first
scrape (every plan file parsed), then the median and worst of 20 scrapes, each a whole
`GET /metrics`; the exporter's peak RSS. Goals: median ≤ 0.5 s, worst ≤ 1 s, RSS ≤ 250 MB.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

PLANS = 200
RUNS_PER_PLAN = 500
SNAPSHOTS_PER_PLAN = 50
SCRAPES = 20
GOAL_MEDIAN_S = 0.5
GOAL_WORST_S = 1.0
GOAL_RSS_MB = 250
ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "plans" / "gpu-platform.example.yaml"
DATASETS = ("checkpoints", "training-data", "model-artifacts")
CATEGORIES = ("Images", "Data", "Secrets", "Cluster", "DNS", "Cadence")
PHASES = ("preflight", "declare", "fence", "bring-up", "dns", "smoke", "measure", "failback",
          "verify failback")  # fmt: skip


def _names() -> list[str]:
    return [f"plan-{n:03d}" for n in range(PLANS)]


def write_plans(folder: Path) -> None:
    text = EXAMPLE.read_text()
    for name in _names():
        (folder / f"{name}.yaml").write_text(text.replace("name: gpu-platform", f"name: {name}", 1))


def _report(plan: str, at: dt.datetime, rnd: random.Random) -> dict[str, Any]:
    results: list[dict[str, Any]] = [
        {
            "id": f"{CATEGORIES[i % 6].lower()}.check{i}", "title": f"Check {i}",
            "category": CATEGORIES[i % 6], "status": rnd.choices(["pass", "warn", "fail"],
                                                                [90, 6, 4])[0],
            "blocking": False, "summary": f"all {i + 3} things fine", "duration_s": 0.12,
            "evidence": {"examples": [f"item-{j}" for j in range(5)], "count": i + 3},
            "remediation": "",
        }
        for i in range(16)
    ]  # fmt: skip
    rows = [{"name": ds, "rpo_target_s": 1800.0, "lag_s": round(rnd.uniform(0, 4000), 1),
             "within_target": True, "unreplicated": 0} for ds in DATASETS]  # fmt: skip
    results.append({"id": "data.rpo", "title": "Replication lag within RPO", "category": "Data",
                    "status": "pass", "blocking": False, "summary": "ok", "duration_s": 0.2,
                    "evidence": {"datasets": rows}, "remediation": ""})  # fmt: skip
    return {"plan": plan, "checked_at": at.isoformat(timespec="seconds"), "results": results}


def _timeline(start: dt.datetime) -> list[dict[str, Any]]:
    return [
        {"name": name, "started_at": start.isoformat(), "ended_at": start.isoformat(),
         "seconds": 1.0, "status": "ok", "steps": [{"name": f"{name} step", "status": "ok"}]}
        for name in PHASES
    ]  # fmt: skip


def _run(plan: str, n: int, started: dt.datetime, rnd: random.Random) -> dict[str, Any]:
    mode = "incident" if rnd.random() < 0.1 else "drill"
    status = rnd.choices(["succeeded", "failed", "rolled-back", "dry-run"], [80, 8, 8, 4])[0]
    measured = status == "succeeded"
    unfinished = n == RUNS_PER_PLAN - 1 and rnd.random() < 0.03
    rto = rnd.uniform(20, 900)
    return {
        "id": f"{plan}-{n:05d}", "plan": plan, "plan_digest": "0" * 64, "mode": mode,
        "dry_run": status == "dry-run", "operator": "prefect", "reason": "quarterly drill",
        "status": "running" if unfinished else status, "started_at": started,
        "t0": started, "restored_at": None,
        "finished_at": None if unfinished else started + dt.timedelta(seconds=rto + 60),
        "rto_seconds": rto if measured else None,
        "client_rto_seconds": rto + 30 if measured else None,
        "rpo_seconds": {ds: rnd.uniform(0, 2000) for ds in DATASETS} if measured else {},
        "verdict": "met" if measured else "failed", "timeline": _timeline(started),
        "readiness": _report(plan, started, rnd),
        "details": {}, "flow_run_id": None, "error": None,
    }  # fmt: skip


def fill(db_url: str) -> None:
    from drills.store.bulk import load
    from drills.store.history import HistoryStore
    from drills.store.models import DrillRun, ReadinessSnapshot

    store = HistoryStore(db_url)
    rnd = random.Random(13)
    now = dt.datetime.now(dt.UTC)
    for plan in _names():
        runs = [
            _run(plan, n, now - dt.timedelta(hours=(RUNS_PER_PLAN - n) * 17), rnd)
            for n in range(RUNS_PER_PLAN)
        ]
        snapshots = []
        for n in range(SNAPSHOTS_PER_PLAN):
            at = now - dt.timedelta(minutes=15 * (SNAPSHOTS_PER_PLAN - n))
            snapshots.append({"plan": plan, "checked_at": at, "ok": True, "blocking": 0,
                              "report": _report(plan, at, rnd)})  # fmt: skip
        load(store, (DrillRun, [runs]), (ReadinessSnapshot, [snapshots]))
    store.close()


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _scrape(url: str) -> tuple[float, str]:
    began = time.perf_counter()
    text = httpx.get(url, timeout=30).raise_for_status().text
    return time.perf_counter() - began, text


def measure(tmp: Path, db_url: str) -> dict[str, float]:
    from drills_lab.procs import free_port

    port = free_port()
    env = dict(os.environ, DRILLS_PLANS=str(tmp / "plans" / "*.yaml"))
    argv = [sys.executable, "-m", "drills", "metrics", "serve", "--port", str(port),
            "--db", db_url]  # fmt: skip
    url = f"http://127.0.0.1:{port}/metrics"
    exporter = subprocess.Popen(argv, env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                first, text = _scrape(url)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or exporter.poll() is not None:
                    raise
                time.sleep(0.1)
        assert text.count("drills_plan_rto_target_seconds{") == PLANS, "not every plan"
        times = [_scrape(url)[0] for _ in range(SCRAPES)]
        rss = _peak_rss_mb(exporter.pid)
    finally:
        exporter.terminate()
        exporter.wait(10)
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    return {"first": first, "median": statistics.median(times), "worst": max(times),
            "rss": rss, "series": series, "bytes": len(text)}  # fmt: skip


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as name:
        tmp = Path(name)
        (tmp / "plans").mkdir()
        write_plans(tmp / "plans")
        db_url = f"sqlite:///{tmp / 'history.db'}"
        began = time.perf_counter()
        fill(db_url)
        size = (tmp / "history.db").stat().st_size / 1e6
        print(f"setup: {PLANS} plans, {PLANS * RUNS_PER_PLAN} runs, "
              f"{PLANS * SNAPSHOTS_PER_PLAN} readiness snapshots in "
              f"{time.perf_counter() - began:.0f}s ({size:.0f} MB SQLite)")  # fmt: skip
        got = measure(tmp, db_url)
    load = os.getloadavg()[0]
    print(f"/metrics over HTTP, {got['series']:.0f} series, {got['bytes'] / 1e6:.1f} MB "
          f"(load average {load:.1f} on {os.cpu_count()} CPUs):")  # fmt: skip
    print(f"  first scrape (200 plan files parsed): {got['first']:.3f}s")
    checks = [
        (f"median of {SCRAPES} scrapes", got["median"], GOAL_MEDIAN_S, "s"),
        (f"worst of {SCRAPES} scrapes", got["worst"], GOAL_WORST_S, "s"),
        ("exporter peak RSS", got["rss"], GOAL_RSS_MB, " MB"),
    ]
    failed = 0
    for label, value, goal, unit in checks:
        ok = value <= goal
        failed += not ok
        print(f"  {label:<24}{value:8.3f}{unit}   goal ≤ {goal}{unit} {'met' if ok else 'MISSED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
