"""The load probe (loadtest, open model) against a second, independent load generator, and
what the probe adds to a drill.

Agreement: on a lab, the same load (RATE requests a second for DURATION_S, a new
connection each, through the plan's name resolved on its DNS) is put on the primary's
service endpoint by the probe (``run_load``: loadtest, percentiles computed from every
request's latency) and by ``hey`` (Debian; RATE ÷ WORKERS queries a second a worker,
keep-alive off, its CSV of every request's time), both at once (2 × RATE in all), so that
both meet the same moments of a shared machine. Goal:
their p95 and throughput agree within 10 %. hey is closed-model (a worker waits for its
answer): against an endpoint far from saturation, as here, that cannot bias it; against
one near saturation it would report less latency than the clients see, which is why the
probe is not hey.

Overhead: drills on the same lab, in turns, without and with a ``load`` block (and no SLO,
so no hold is counted); the load's own time (twice DURATION_S: the primary's baseline and
DR) is taken off. Medians of RUNS each. The probe's own overhead (resolve, start node and
loadtest, read the result) is printed too, as the probe measured it.
"""

from __future__ import annotations

import csv
import io
import shutil
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from drills.plan import DrillPlan, LoadProbe, load_plan
from drills.store.history import HistoryStore
from drills.takeover.drill import Drill, DrillRequest
from drills.targets.load_probe import LoadResult, percentile, run_load, target_url
from drills.targets.sites import Targets
from drills_lab import control

RATE, DURATION_S, WORKERS = 50, 20.0, 5
DRILL_LOAD_RATE, DRILL_LOAD_S = 20, 2.0
RUNS = 2
AGREE = 0.10


def _hey(url: str, host: str) -> dict[str, float]:
    binary = shutil.which("hey")
    if binary is None:
        raise SystemExit("hey is not installed: run scripts/sysdeps.sh (Debian package hey)")
    done = subprocess.run(
        [binary, "-z", f"{DURATION_S:g}s", "-c", str(WORKERS), "-q", str(RATE // WORKERS),
         "-disable-keepalive", "-H", f"Host: {host}", "-o", "csv", url],
        capture_output=True, text=True, check=True, timeout=DURATION_S + 60,
    )  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    times = sorted(float(r["response-time"]) for r in rows)
    ends = [float(r["offset"]) + float(r["response-time"]) for r in rows]
    errors = sum(not r["status-code"].startswith("2") for r in rows)
    return {
        "requests": len(rows), "p50": percentile(times, 50), "p95": percentile(times, 95),
        "p99": percentile(times, 99), "throughput": len(rows) / max(ends),
        "error_rate": errors / len(rows),
    }  # fmt: skip


def _lab_plan(state_dir: Path, load: dict[str, Any] | None) -> DrillPlan:
    data = yaml.safe_load((state_dir / "plan.yaml").read_text())
    if load is not None:
        data["load"] = load
    path = state_dir / f"bench-{time.monotonic_ns()}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_plan(path)


def _agreement(plan: DrillPlan) -> bool:
    smoke_url = str(plan.smoke[0].url)
    probe = LoadProbe(url=smoke_url, rate=RATE, duration=DURATION_S, p95=10.0)
    with Targets(plan) as targets:
        url, address, host = target_url(probe, targets.dns)
        # At the same time, so that both see the same endpoint on the same (shared, busy)
        # machine: run one after the other, each meets another moment's noise.
        with ThreadPoolExecutor(1) as pool:
            hey = pool.submit(_hey, url, host)
            ours: LoadResult = run_load(probe, targets.dns, "primary")
            theirs = hey.result()
    print(f"load: {RATE} requests/s from each generator at once for {DURATION_S:g}s, a new "
          f"connection each, to {address} as {host} (the lab's primary service endpoint, "
          f"through the plan's DNS)")  # fmt: skip
    print(f"{'':10} {'requests':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
          f"{'per s':>8} {'errors':>7}")  # fmt: skip
    print(f"{'loadtest':10} {ours.sent:>8} {ours.p50_s * 1e3:>8.2f} {ours.p95_s * 1e3:>8.2f} "
          f"{ours.p99_s * 1e3:>8.2f} {ours.throughput:>8.1f} {ours.error_rate:>7.1%}")  # fmt: skip
    print(f"{'hey':10} {theirs['requests']:>8.0f} {theirs['p50'] * 1e3:>8.2f} "
          f"{theirs['p95'] * 1e3:>8.2f} {theirs['p99'] * 1e3:>8.2f} "
          f"{theirs['throughput']:>8.1f} {theirs['error_rate']:>7.1%}")  # fmt: skip
    p95_gap = abs(ours.p95_s - theirs["p95"]) / theirs["p95"]
    rate_gap = abs(ours.throughput - theirs["throughput"]) / theirs["throughput"]
    ok = p95_gap <= AGREE and rate_gap <= AGREE
    print(f"p95 differs by {p95_gap:.1%}, throughput by {rate_gap:.1%} (goal ≤ {AGREE:.0%} "
          f"each): {'met' if ok else 'NOT met'}")  # fmt: skip
    print(f"probe overhead (resolve, start loadtest, read its result): {ours.overhead_s:.2f}s")
    return ok


def _drill_seconds(plan: DrillPlan, db: str) -> tuple[float, float | None]:
    started = time.monotonic()
    result = Drill(DrillRequest(plan, operator="bench", reason="load probe overhead"),
                   HistoryStore(db)).run()  # fmt: skip
    wall = time.monotonic() - started
    if result.status != "succeeded":
        raise SystemExit(f"drill {result.status}: {result.error}")
    stored = HistoryStore(db).get_run(result.run_id)
    load = stored.details.load if stored else None
    return wall, (load or {}).get("overhead_seconds")


def _overhead(state_dir: Path, db: str) -> None:
    plain = _lab_plan(state_dir, None)
    smoke_url = str(plain.smoke[0].url)
    loaded = _lab_plan(state_dir, {"url": smoke_url, "rate": DRILL_LOAD_RATE,
                                   "duration": f"{DRILL_LOAD_S:g}s", "p95": "5s"})  # fmt: skip
    without, with_load, probe_own = [], [], []
    for _ in range(RUNS):
        without.append(_drill_seconds(plain, db)[0])
        wall, own = _drill_seconds(loaded, db)
        with_load.append(wall)
        probe_own.append(own or 0.0)
    added = statistics.median(with_load) - statistics.median(without)
    overhead = added - 2 * DRILL_LOAD_S
    print(f"drill without load {statistics.median(without):.2f}s, with a load of "
          f"{DRILL_LOAD_RATE}/s for {DRILL_LOAD_S:g}s at each site "
          f"{statistics.median(with_load):.2f}s (medians of {RUNS})")  # fmt: skip
    print(f"added to the drill: {added:.2f}s, of which the loads themselves "
          f"{2 * DRILL_LOAD_S:g}s: overhead {overhead:.2f}s (the probe's own: "
          f"{statistics.median(probe_own):.2f}s for both sites; no SLO hold counted)")  # fmt: skip


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-load-probe-") as tmp:
        state_dir = Path(tmp) / "lab"
        control.up(state_dir, ready_delay=0.3)
        try:
            ok = _agreement(_lab_plan(state_dir, None))
            _overhead(state_dir, f"sqlite:///{Path(tmp) / 'history.db'}")
        finally:
            control.down(state_dir)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
