"""`drills readiness --all` over 50 plans on the same two lab sites, against one plan.

Fifty copies of the lab's plan under other names share every target: the checks of a
fleet run should ask each cluster, registry and bucket once, not fifty times. Ours:
one plan's readiness (``run_readiness``), then the fifty at once (``run_readiness_all``,
default concurrency), both storing their snapshots. Goal: the fleet run takes at most
3× one plan's time.

The machine is shared, so one plan's time (under a second, mostly waiting on the lab)
moves with the load of the moment, and a ratio of two medians measured minutes apart
moves with it. So the two run side by side, in pairs, their order alternating (one plan
first, then the fleet first): each pair's ratio sees the same load. After a warm-up
pair, REPEATS pairs; the goal is judged on the median of the pairs' ratios, and the
spread of the ratios and the load average are printed with it.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from drills.checks.fleet import PlanReadiness, run_readiness_all
from drills.checks.readiness import run_readiness
from drills.lab import control
from drills.plan import load_plan
from drills.store.history import HistoryStore

PLANS = 50
REPEATS = 7
GOAL_RATIO = 3.0


@dataclass
class Timings:
    """Wall and CPU seconds (this process, threads included) of each timed call."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def time(self, work: Callable[[], object]) -> object:
        began, used = time.perf_counter(), time.process_time()
        result = work()
        self.wall.append(time.perf_counter() - began)
        self.cpu.append(time.process_time() - used)
        return result

    def line(self) -> str:
        w = self.wall
        return (f"median {statistics.median(w):5.2f}s (min {min(w):.2f}, max {max(w):.2f}), "
                f"cpu {statistics.median(self.cpu):.2f}s")  # fmt: skip


def _copies(state: Path) -> list[str]:
    data = yaml.safe_load((state / "plan.yaml").read_text())
    paths = []
    for i in range(PLANS):
        data["name"] = f"fleet-{i:02d}"
        path = state / f"fleet-{i:02d}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        paths.append(str(path))
    return paths


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except OSError:
        return "load average: {:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg())


def _pairs(state: Path, history: HistoryStore) -> tuple[Timings, Timings, int]:
    """REPEATS interleaved pairs after a warm-up pair; and how many plans the fleet's last
    run gave a report."""
    paths = _copies(state)
    one, fleet = Timings(), Timings()
    results: list[PlanReadiness] = []

    def single() -> None:
        run_readiness(load_plan(state / "plan.yaml"), history=history)

    def together() -> None:
        results[:] = run_readiness_all(paths, history=history)

    for repeat in range(REPEATS + 1):
        pair = [(one, single), (fleet, together)]
        for timings, work in pair if repeat % 2 == 0 else pair[::-1]:
            timings.time(work)
        if repeat == 0:  # the warm-up: connections, imports, the store's first writes
            for timings in (one, fleet):
                timings.wall.clear()
                timings.cpu.clear()
    return one, fleet, sum(1 for r in results if r.report is not None)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-readiness-all-") as tmp:
        state = Path(tmp) / "lab"
        info, _ = control.up(state, ready_delay=1.0)
        print(f"setup: lab up ({info.dns_provider} DNS), {PLANS} copies of its plan, "
              f"{REPEATS} interleaved pairs after a warm-up")  # fmt: skip
        print(f"  before: {_uptime()}")
        try:
            history = HistoryStore(f"sqlite:///{Path(tmp) / 'history.db'}")
            one, fleet, reports = _pairs(state, history)
        finally:
            control.down(state)
    print(f"  after:  {_uptime()} ({os.cpu_count()} CPUs)")
    ratios = [f / o for f, o in zip(fleet.wall, one.wall, strict=True)]
    ratio = statistics.median(ratios)
    quartiles = statistics.quantiles(ratios, n=4)
    ok = ratio <= GOAL_RATIO and reports == PLANS
    print(f"  one plan:          {one.line()}")
    print(f"  {PLANS} plans (--all): {fleet.line()}, {reports} results")
    pairs = zip(fleet.wall, one.wall, strict=True)
    print(f"  pairs (--all/one): {' '.join(f'{f:.2f}/{o:.2f}' for f, o in pairs)}")
    print(f"  ratio median {ratio:.2f}× one plan (quartiles {quartiles[0]:.2f}–{quartiles[2]:.2f}, "
          f"min {min(ratios):.2f}, max {max(ratios):.2f}); goal ≤ {GOAL_RATIO:.0f}× "
          f"{'met' if ok else 'MISSED'} ({PLANS} single runs would take "
          f"~{PLANS * statistics.median(one.wall):.0f}s)")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
