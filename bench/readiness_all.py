"""`drills readiness --all` over 50 plans on the same two lab sites, against one plan.

Fifty copies of the lab's plan under other names share every target: the checks of a
fleet run should ask each cluster, registry and bucket once, not fifty times. Measured
two ways, each storing its snapshots:

- as a user runs them: `drills readiness PLAN --json` against `drills readiness --all
  --json` over the fifty, each a process of its own (start-up included); the goal, at
  most 3× one plan's time, is judged here;
- the work alone, in this process: ``run_readiness`` against ``run_readiness_all``, so
  what the fleet run costs beyond the start-up is visible too (its CPU is about 30 ms a
  plan: a plan file parsed and validated, its checks evaluated, its report sealed).

The machine is shared, so one plan's time moves with the load of the moment, and a ratio
of two medians measured minutes apart moves with it. So the two run side by side, in
pairs, their order alternating (one plan first, then the fleet first): each pair's ratio
sees the same load. After a warm-up pair, REPEATS pairs; the median of the pairs' ratios
is printed with their spread and the load average.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from drills.checks.fleet import PlanReadiness, run_readiness_all
from drills.checks.readiness import run_readiness
from drills.plan import load_plan
from drills.store.history import HistoryStore
from drills_lab import control

PLANS = 50
REPEATS = 7
GOAL_RATIO = 3.0


def _cpu() -> float:
    """CPU seconds of this process (threads included) and of its children waited for."""
    spent = os.times()
    return time.process_time() + spent.children_user + spent.children_system


@dataclass
class Timings:
    """Wall and CPU seconds (this process and its children) of each timed call."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def time(self, work: Callable[[], object]) -> object:
        began, used = time.perf_counter(), _cpu()
        result = work()
        self.wall.append(time.perf_counter() - began)
        self.cpu.append(_cpu() - used)
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


Work = Callable[[], object]


def _pairs(single: Work, together: Work) -> tuple[Timings, Timings]:
    """REPEATS interleaved pairs after a warm-up pair."""
    one, fleet = Timings(), Timings()
    for repeat in range(REPEATS + 1):
        pair = [(one, single), (fleet, together)]
        for timings, work in pair if repeat % 2 == 0 else pair[::-1]:
            timings.time(work)
        if repeat == 0:  # the warm-up: connections, imports, the store's first writes
            for timings in (one, fleet):
                timings.wall.clear()
                timings.cpu.clear()
    return one, fleet


def _in_process(state: Path, paths: list[str], history: HistoryStore) -> tuple[Timings, ...]:
    results: list[PlanReadiness] = []

    def together() -> None:
        results[:] = run_readiness_all(paths, history=history)
        if sum(1 for r in results if r.report is not None) != PLANS:
            raise SystemExit(f"the fleet run gave {len(results)} results, not {PLANS} reports")

    return _pairs(lambda: run_readiness(load_plan(state / "plan.yaml"), history=history),
                  together)  # fmt: skip


def _cli(state: Path, paths: list[str], db: str) -> tuple[Timings, ...]:
    def drills(*args: str) -> Work:
        def run() -> None:
            done = subprocess.run(
                [sys.executable, "-m", "drills", "readiness", *args, "--json", "--db", db],
                capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            if done.returncode not in (0, 1) or not done.stdout.strip():
                raise SystemExit(f"drills readiness {args[0]} failed: {done.stderr[-2000:]}")
            if args[0] == "--all" and len(json.loads(done.stdout)["plans"]) != PLANS:
                raise SystemExit("drills readiness --all gave too few results")

        return run

    return _pairs(drills(str(state / "plan.yaml")), drills("--all", "--plans", ",".join(paths)))


def _report(title: str, one: Timings, fleet: Timings) -> float:
    ratios = [f / o for f, o in zip(fleet.wall, one.wall, strict=True)]
    ratio = statistics.median(ratios)
    quartiles = statistics.quantiles(ratios, n=4)
    pairs = zip(fleet.wall, one.wall, strict=True)
    print(f"{title}")
    print(f"  one plan:          {one.line()}")
    print(f"  {PLANS} plans (--all): {fleet.line()}")
    print(f"  pairs (--all/one): {' '.join(f'{f:.2f}/{o:.2f}' for f, o in pairs)}")
    print(f"  ratio median {ratio:.2f}× one plan (quartiles {quartiles[0]:.2f}–{quartiles[2]:.2f}, "
          f"min {min(ratios):.2f}, max {max(ratios):.2f}); {PLANS} single runs would take "
          f"~{PLANS * statistics.median(one.wall):.0f}s")  # fmt: skip
    return ratio


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-readiness-all-") as tmp:
        state = Path(tmp) / "lab"
        info, _ = control.up(state, ready_delay=1.0)
        print(f"setup: lab up ({info.dns_provider} DNS), {PLANS} copies of its plan, "
              f"{REPEATS} interleaved pairs after a warm-up, each way")  # fmt: skip
        print(f"  before: {_uptime()}")
        db = f"sqlite:///{Path(tmp) / 'history.db'}"
        try:
            paths = _copies(state)
            cli = _cli(state, paths, db)
            work = _in_process(state, paths, HistoryStore(db))
        finally:
            control.down(state)
    print(f"  after:  {_uptime()} ({os.cpu_count()} CPUs)")
    ratio = _report("as a user runs them, a process each:", *cli)
    _report("the work alone, in this process:", *work)
    ok = ratio <= GOAL_RATIO
    print(f"readiness --all: {ratio:.2f}× one plan as a user runs them; goal ≤ {GOAL_RATIO:.0f}× "
          f"{'met' if ok else 'MISSED'}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
