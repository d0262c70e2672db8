"""The whole readiness run on the lab plan: every check, against a real lab.

Ours in-process: ``run_readiness(load_plan(plan))`` five times on one lab, with a
history store as the CLI has; the median is the figure (a two-core shared machine
is noisy). Then the CLI as an operator runs it, ``drills readiness PLAN --json``,
in a subprocess: Python start-up and imports included. Goal: under 3 s wall.

The checks run concurrently, so the wall time is about the slowest check plus the
set-up of the targets: the slowest checks are listed to show where it goes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from drills.checks.readiness import run_readiness
from drills.plan import load_plan
from drills.store.history import HistoryStore
from drills_lab import control

RUNS = 5
GOAL_S = 3.0
SLOWEST = 3
READY_DELAY_S = 1.0
CLI_TIMEOUT_S = 120.0


def _drills_command() -> str:
    """The `drills` entry point installed beside this interpreter."""
    return str(Path(sysconfig.get_path("scripts")) / "drills")


def _in_process(plan_path: Path, db_url: str) -> tuple[float, dict[str, float], int]:
    """One whole run: wall time, each check's duration, and how many checks did not pass."""
    history = HistoryStore(db_url)
    started = time.perf_counter()
    report = run_readiness(load_plan(plan_path), history=history)
    wall = time.perf_counter() - started
    durations = {r.id: r.duration_s for r in report.results}
    return wall, durations, sum(1 for r in report.results if r.status.value != "pass")


def _cli(plan_path: Path, db_url: str) -> tuple[float, int, int]:
    """`drills readiness PLAN --json` as a subprocess: wall, exit code, checks reported."""
    started = time.perf_counter()
    done = subprocess.run(
        [_drills_command(), "readiness", str(plan_path), "--json", "--db", db_url],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )
    wall = time.perf_counter() - started
    try:
        checks = len(json.loads(done.stdout)["results"])
    except (ValueError, KeyError):
        print(f"  the CLI printed no report (exit {done.returncode}): {done.stderr[-400:]}")
        checks = 0
    return wall, done.returncode, checks


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-readiness-") as tmp:
        state = Path(tmp) / "lab"
        begun = time.perf_counter()
        info, _ = control.up(state, ready_delay=READY_DELAY_S)
        print(f"setup: lab up in {time.perf_counter() - begun:.2f}s ({info.dns_provider} DNS)")
        try:
            plan_path = state / "plan.yaml"
            db_url = f"sqlite:///{Path(tmp) / 'history.db'}"
            runs = [_in_process(plan_path, db_url) for _ in range(RUNS)]
            cli_wall, cli_exit, cli_checks = _cli(plan_path, db_url)
        finally:
            control.down(state)

    walls = [wall for wall, _, _ in runs]
    median = statistics.median(walls)
    per_check: dict[str, list[float]] = defaultdict(list)
    for _, by_check, _ in runs:
        for check_id, seconds in by_check.items():
            per_check[check_id].append(seconds)
    slowest = sorted(per_check.items(), key=lambda kv: -statistics.median(kv[1]))[:SLOWEST]
    not_passing = runs[-1][2]

    print(f"readiness of the lab plan: {len(per_check)} checks, {not_passing} not passing")
    print(f"  {'run':<52}{'wall':>8}")
    for i, wall in enumerate(walls, 1):
        print(f"  {f'in-process run {i}':<52}{wall:7.3f}s")
    print(f"  {'in-process median':<52}{median:7.3f}s   goal < {GOAL_S:.0f}s")
    cli_label = f"CLI `drills readiness --json` (exit {cli_exit}, {cli_checks} checks)"
    print(f"  {cli_label:<52}{cli_wall:7.3f}s   (Python start-up and imports included)")
    print(f"  slowest checks (median of {RUNS} runs; they run concurrently):")
    for check_id, durations in slowest:
        spread = f"{min(durations):.3f}–{max(durations):.3f}s"
        print(f"    {check_id:<40}{statistics.median(durations):7.3f}s   ({spread})")
    load = os.getloadavg()
    print(
        f"  at {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, "
        f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    return 0 if median < GOAL_S and cli_checks else 1


if __name__ == "__main__":
    sys.exit(main())
