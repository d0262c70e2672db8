"""How fast the CLI starts: `drills --help` and `drills plan validate` beside `python -c pass`.

Each command runs RUNS times as a subprocess, round-robin so that a burst of load on the
shared machine hits all of them alike; the median wall time is the figure. Goal: at most
0.3 s for both, since an operator types them often and a check in CI runs them per plan.
`drills serve --help` is shown for scale: its group imports SQLAlchemy and httpx.
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

RUNS = 15
GOAL_S = 0.3
ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "plans" / "gpu-platform.example.yaml"


def _drills() -> str:
    """The `drills` entry point installed beside this interpreter."""
    return str(Path(sysconfig.get_path("scripts")) / "drills")


def _commands() -> dict[str, list[str]]:
    plan = os.path.relpath(EXAMPLE)
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "drills --help": [_drills(), "--help"],
        f"drills plan validate {plan}": [_drills(), "plan", "validate", str(EXAMPLE)],
        "drills serve --help (for scale)": [_drills(), "serve", "--help"],
    }


def _once(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> int:
    commands = _commands()
    walls: dict[str, list[float]] = {label: [] for label in commands}
    for argv in commands.values():
        _once(argv)  # warm the page cache and the .pyc files first
    for _ in range(RUNS):
        for label, argv in commands.items():
            walls[label].append(_once(argv))
    medians = {label: statistics.median(times) for label, times in walls.items()}
    print(f"start-up, median of {RUNS} runs")
    print(f"  {'command':<62}{'median':>8}{'min':>8}")
    for label, times in walls.items():
        print(f"  {label:<62}{medians[label]:7.3f}s{min(times):7.3f}s")
    gated = list(commands)[1:3]
    print(f"  goal: {', '.join(gated)} ≤ {GOAL_S:.1f}s each")
    load = os.getloadavg()
    print(
        f"  at {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, "
        f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    return 0 if all(medians[label] <= GOAL_S for label in gated) else 1


if __name__ == "__main__":
    sys.exit(main())
