"""From the click to the fence: an incident declared the dashboard's way, timed.

The real `drills serve` stack (a Prefect server, the deployments of prefect.yaml and
a process worker) is started once. Each declaration gets a fresh lab and goes the
way the dashboard's button goes: the launcher's ``declare`` (drills.launch.takeovers),
T0 taken just before the call (the dashboard takes it at the click). The
worker picks the flow run up, the flow runs the takeover; afterwards its stored
timeline says when the fence began, its measurement when DNS switched and the RTO,
and Prefect says when the flow run started running.

Beside it, the same takeover as ``drills run --mode incident --yes`` on a fresh lab:
the RTO with no scheduler in the way. Goals: click → fence begins, median ≤ 2.0 s;
RTO through the dashboard's path ≤ the CLI's RTO + 2.0 s.
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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from drills.launch.takeovers import Consent, declare
from drills.orchestrator import serve
from drills.orchestrator.flow_runs import drill_run_of
from drills.orchestrator.rest import PrefectRest
from drills.plan import load_plan
from drills.store.details import IncidentLink
from drills.store.history import HistoryStore
from drills.store.models import DrillRun
from drills_lab import control
from drills_lab.runtime import LabInfo

DECLARATIONS = 5
READY_DELAY_S = 1.0
DEPLOYMENT = "minimum-takeover-drill/declare-incident"
RUN_TIMEOUT_S = 180.0
GOAL_FENCE_S = 2.0
GOAL_RTO_MARGIN_S = 2.0
PROJECT_DIR = Path(__file__).resolve().parents[1]
MARKS = ("flow run running", "fence begins", "DNS switched", "RTO (restored)")


@dataclass(frozen=True)
class Declared:
    marks: dict[str, float]  # seconds after T0, one per name of MARKS
    status: str
    preflight_end: float | None  # when the readiness preflight ended, after T0


@contextmanager
def _fresh_lab(state: Path) -> Iterator[LabInfo]:
    begun = time.perf_counter()
    info, _ = control.up(state, ready_delay=READY_DELAY_S, slo=False)
    try:
        print(f"  fresh lab up in {time.perf_counter() - begun:.2f}s", flush=True)
        yield info
    finally:
        control.down(state)


def _seconds(after: dt.datetime | None, t0: dt.datetime) -> float:
    return float("nan") if after is None else (after - t0).total_seconds()


def _phase_start(run: DrillRun, name: str) -> dt.datetime | None:
    for phase in run.timeline or []:
        if phase["name"] == name:
            return dt.datetime.fromisoformat(phase["started_at"])
    return None


def _readiness_end(run: DrillRun) -> dt.datetime | None:
    for phase in run.timeline or []:
        for step in phase["steps"]:
            if step["name"] == "readiness checks" and step["ended_at"]:
                return dt.datetime.fromisoformat(step["ended_at"])
    return None


def _wait_final(api: PrefectRest, flow_run_id: str) -> str:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        run = api.flow_run(flow_run_id)
        if run.final:
            return run.state_name
        time.sleep(0.2)
    raise SystemExit(f"flow run {flow_run_id} did not end within {RUN_TIMEOUT_S:.0f}s")


def _declare(api: PrefectRest, history: HistoryStore, info: LabInfo, i: int) -> Declared:
    plan_path = Path(info.state_dir) / "plan.yaml"
    plan = load_plan(plan_path)
    t0 = dt.datetime.now(dt.UTC)  # the click
    consent = Consent(str(plan_path), plan.name, "bench", f"bench declare_latency {i}", plan.name)
    declaration = declare(api, DEPLOYMENT, history, consent, declared_at=t0)
    if not declaration.accepted or declaration.flow_run_id is None:
        raise SystemExit(f"declaration {i} refused: {declaration.message}")
    state = _wait_final(api, declaration.flow_run_id)
    flow_run = api.flow_run(declaration.flow_run_id)
    run = drill_run_of(history, declaration.flow_run_id)
    if run is None:
        raise SystemExit(f"flow run {declaration.flow_run_id} recorded no run ({state})")
    m = run.details.measurement
    marks = {
        "flow run running": _seconds(flow_run.started, t0),
        "fence begins": _seconds(_phase_start(run, "fence"), t0),
        "DNS switched": _seconds(m.dns_switched if m else None, t0),
        "RTO (restored)": run.rto_seconds if run.rto_seconds is not None else float("nan"),
    }
    ready = _readiness_end(run)
    _close(history, run)
    return Declared(marks, str(run.status), _seconds(ready, t0) if ready else None)


def _close(history: HistoryStore, run: DrillRun) -> None:
    """Close the incident in the history, as its failback would: the next declaration is
    on a fresh lab, but a plan the history says serves from DR refuses every takeover."""
    closed = IncidentLink(closed_at=dt.datetime.now(dt.UTC), closed_by="bench declare_latency")
    history.update_run(run.id, details=run.details.model_copy(update={"incident": closed}))


def _cli_rto(info: LabInfo, db_url: str) -> float:
    drills = str(Path(sysconfig.get_path("scripts")) / "drills")
    plan_path = Path(info.state_dir) / "plan.yaml"
    argv = [drills, "run", str(plan_path), "--mode", "incident", "--yes", "--json",
            "--db", db_url, "--operator", "bench"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    try:
        rto = json.loads(done.stdout).get("rto_seconds")
    except ValueError:
        rto = None
    if rto is None:
        raise SystemExit(f"drills run gave no RTO (exit {done.returncode}): {done.stderr[-800:]}")
    return float(rto)


def _table(runs: list[Declared], cli_rto: float) -> tuple[float, float]:
    header = "".join(f"{f'#{i}':>8}" for i in range(1, len(runs) + 1))
    print(f"  {'seconds after the click (T0)':<34}{header}{'median':>8}{'worst':>8}")
    for mark in MARKS:
        values = [r.marks[mark] for r in runs]
        cells = "".join(f"{v:8.2f}" for v in values)
        print(f"  {mark:<34}{cells}{statistics.median(values):8.2f}{max(values):8.2f}")
    ends = [r.preflight_end for r in runs if r.preflight_end is not None]
    if ends:
        cells = "".join(f"{v:8.2f}" for v in ends)
        print(f"  {'(readiness preflight ends)':<34}{cells}")
    print(f"  {'CLI: drills run --mode incident':<34}{'RTO':>8}{cli_rto:8.2f}")
    fence = statistics.median(r.marks["fence begins"] for r in runs)
    rto = statistics.median(r.marks["RTO (restored)"] for r in runs)
    return fence, rto


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-declare-") as tmp:
        root = Path(tmp)
        db_url = f"sqlite:///{root / 'history.db'}"
        os.environ["DRILLS_DB_URL"] = db_url  # the worker's flow runs write here too
        begun = time.perf_counter()
        info, _ = serve.up(root / "prefect-local", project_dir=PROJECT_DIR)
        query = serve.worker_env(info).get("PREFECT_WORKER_QUERY_SECONDS")
        print(f"setup: drills serve up in {time.perf_counter() - begun:.1f}s "
              f"(PREFECT_WORKER_QUERY_SECONDS={query})", flush=True)  # fmt: skip
        history = HistoryStore(db_url)
        runs: list[Declared] = []
        try:
            with PrefectRest(info.api_url) as api:
                for i in range(1, DECLARATIONS + 1):
                    print(f"declaration {i}", flush=True)
                    with _fresh_lab(root / f"lab-{i}") as lab:
                        runs.append(_declare(api, history, lab, i))
                    marks = ", ".join(f"{k} {v:.2f}s" for k, v in runs[-1].marks.items())
                    print(f"  {runs[-1].status}: {marks}", flush=True)
        finally:
            serve.down(root / "prefect-local")
        print("CLI incident for comparison", flush=True)
        with _fresh_lab(root / "lab-cli") as lab:
            cli_rto = _cli_rto(lab, f"sqlite:///{root / 'cli.db'}")
    print(
        f"incident declared the dashboard's way on the lab plan, {DECLARATIONS} declarations, "
        f"each on a fresh lab (rollout delay {READY_DELAY_S:.1f}s)"
    )
    fence, rto = _table(runs, cli_rto)
    ok_fence = fence <= GOAL_FENCE_S
    ok_rto = rto <= cli_rto + GOAL_RTO_MARGIN_S
    print(f"  goal: click → fence median ≤ {GOAL_FENCE_S:.1f}s: "
          f"{'met' if ok_fence else 'MISSED'} ({fence:.2f}s)")  # fmt: skip
    print(f"  goal: RTO ≤ CLI RTO + {GOAL_RTO_MARGIN_S:.1f}s: "
          f"{'met' if ok_rto else 'MISSED'} ({rto:.2f}s vs {cli_rto:.2f}s)")  # fmt: skip
    statuses = {r.status for r in runs}
    load = os.getloadavg()
    print(
        f"  at {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, "
        f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; run statuses {sorted(statuses)}"
    )
    return 0 if ok_fence and ok_rto and statuses == {"succeeded"} else 1


if __name__ == "__main__":
    sys.exit(main())
