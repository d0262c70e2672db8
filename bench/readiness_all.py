"""`drills readiness --all` over 50 plans on the same two lab sites, against one plan.

Fifty copies of the lab's plan under other names share every target: the checks of a
fleet run should ask each cluster, registry and bucket once, not fifty times. Ours:
one plan's readiness (``run_readiness``), then the fifty at once (``run_readiness_all``,
default concurrency), both storing their snapshots. Medians of three. Goal: the fleet
run takes at most 3× one plan's time.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from drills.checks.fleet import run_readiness_all
from drills.checks.readiness import run_readiness
from drills.lab import control
from drills.plan import load_plan
from drills.store.history import HistoryStore

PLANS = 50
RUNS = 3
GOAL_RATIO = 3.0


def _copies(state: Path) -> list[str]:
    data = yaml.safe_load((state / "plan.yaml").read_text())
    paths = []
    for i in range(PLANS):
        data["name"] = f"fleet-{i:02d}"
        path = state / f"fleet-{i:02d}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        paths.append(str(path))
    return paths


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-readiness-all-") as tmp:
        state = Path(tmp) / "lab"
        info, _ = control.up(state, ready_delay=1.0)
        print(f"setup: lab up ({info.dns_provider} DNS), {PLANS} copies of its plan")
        try:
            history = HistoryStore(f"sqlite:///{Path(tmp) / 'history.db'}")
            paths = _copies(state)
            one, fleet, results = [], [], []
            cpu = {"one": 0.0, "all": 0.0}  # this process's CPU time, threads included
            for _ in range(RUNS):
                began, used = time.perf_counter(), time.process_time()
                run_readiness(load_plan(state / "plan.yaml"), history=history)
                one.append(time.perf_counter() - began)
                cpu["one"] += (time.process_time() - used) / RUNS
                began, used = time.perf_counter(), time.process_time()
                results = run_readiness_all(paths, history=history)
                fleet.append(time.perf_counter() - began)
                cpu["all"] += (time.process_time() - used) / RUNS
        finally:
            control.down(state)
    single, together = statistics.median(one), statistics.median(fleet)
    reports = sum(1 for r in results if r.report is not None)
    ratio = together / single
    ok = ratio <= GOAL_RATIO and reports == PLANS
    print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"  one plan:          {single:6.2f}s  (runs: {' '.join(f'{x:.2f}' for x in one)}), "
          f"{cpu['one']:.2f}s cpu")  # fmt: skip
    runs = " ".join(f"{x:.2f}" for x in fleet)
    print(f"  {PLANS} plans (--all): {together:6.2f}s  (runs: {runs}), {cpu['all']:.2f}s cpu, "
          f"{reports} results")  # fmt: skip
    print(f"  ratio {ratio:.2f}× one plan; goal ≤ {GOAL_RATIO:.0f}× {'met' if ok else 'MISSED'}"
          f" ({PLANS} single runs would take ~{PLANS * single:.0f}s)")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
