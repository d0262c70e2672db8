"""A warm runner for the `declare-incident` deployment: the click to the fence in seconds.

A process worker finds a flow run on its next poll, then starts a new Python that
imports Prefect, the flow and drills before the flow's first line: seconds that a
known-broken primary goes on taking writes. This runner, started beside the worker
by `drills serve`, keeps one *standby* process with all of that already imported,
and asks Prefect for due runs of the one deployment a few times a second. It claims a
run as a worker does, by moving it to Pending (Prefect's orchestration lets exactly
one claimant win, so it and the worker never both run it), hands its id to the
standby, which runs the flow at once, and starts the next standby.

It does what a worker does for the runs it started: a run cancelled in Prefect (its
UI, the dashboard's Cancel) gets SIGTERM, on which an incident stops and reports,
and SIGKILL after the same grace a worker gives; a run whose process died without a
final state is marked Crashed.

    python -m flows.warm --deployment minimum-takeover-drill/declare-incident
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

from drills.errors import TargetError
from drills.orchestrator.rest import FlowRunState, PrefectRest

log = logging.getLogger("drills.orchestrator.warm")

DEPLOYMENT = "minimum-takeover-drill/declare-incident"
POLL_S = 0.2
KILL_AFTER_S = 30.0  # as a Prefect worker: SIGKILL a cancelled run 30 s after SIGTERM
READY_LINE = "ready"


# -- the standby: everything imported, waiting for a flow run id ---------------------
def standby() -> int:
    """Import what a flow run of the drill needs, say so, then run the run it is given."""
    from uuid import UUID

    from prefect.engine import handle_engine_signals
    from prefect.flow_engine import flow_run_logger, load_flow_run, run_flow

    from drills.checks.catalog import load_checks
    from flows.drill import minimum_takeover_drill

    load_checks()  # the check modules, and the SDKs they import
    print(READY_LINE, flush=True)
    # Nobody reads the pipe after this line: what the run prints goes to the runner's log.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    line = sys.stdin.readline().strip()
    if not line:  # the runner stopped without a run for us
        return 0
    flow_run_id = UUID(line)
    os.environ["PREFECT__FLOW_RUN_ID"] = line
    with handle_engine_signals(flow_run_id):
        flow_run = load_flow_run(flow_run_id=flow_run_id)
        logger = flow_run_logger(flow_run)  # as `python -m prefect.engine` passes it
        run_flow(minimum_takeover_drill, flow_run=flow_run, error_logger=logger)  # type: ignore[arg-type]
    return 0


# -- the runner: claims due runs, hands them to the standby, watches them ------------
@dataclass
class Started:
    process: subprocess.Popen[str]
    name: str
    terminated_at: float | None = None


def _spawn_standby() -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-m", "flows.warm", "--standby"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    return child


def _ready(child: subprocess.Popen[str]) -> subprocess.Popen[str]:
    """The standby once it has imported everything; another if it died doing so."""
    assert child.stdout is not None
    while child.stdout.readline().strip() != READY_LINE:
        if child.poll() is not None:
            log.error(
                "a standby exited while importing (exit %s); starting another", child.returncode
            )
            time.sleep(1.0)
            child = _spawn_standby()
            assert child.stdout is not None
    return child


class WarmRunner:
    def __init__(self, api: PrefectRest, deployment: str, poll_s: float = POLL_S) -> None:
        self.api = api
        self.deployment = deployment
        self.poll_s = poll_s
        self.started: dict[str, Started] = {}
        self.stopping = False

    def serve(self) -> None:
        deployment_id = self.api.deployment(self.deployment).id
        child = _ready(_spawn_standby())
        log.info("warm runner for %s ready (standby pid %d)", self.deployment, child.pid)
        try:
            while not self.stopping:
                for run in self._due(deployment_id):
                    if self._claim(run):
                        self._hand(child, run)
                        child = _ready(_spawn_standby())
                self._watch()
                time.sleep(self.poll_s)
        finally:
            child.kill()
            child.wait()

    def _due(self, deployment_id: str) -> list[FlowRunState]:
        try:
            runs = self.api.flow_runs(deployment_id, ["SCHEDULED"], limit=10)
        except TargetError as exc:
            log.warning("cannot list the runs of %s: %s", self.deployment, exc)
            return []
        now = time.time()
        return [r for r in runs if r.expected_start is None or r.expected_start.timestamp() <= now]

    def _claim(self, run: FlowRunState) -> bool:
        message = f"claimed by the drills warm runner (pid {os.getpid()})"
        try:
            change = self.api.set_flow_run_state(run.id, "PENDING", "Pending", message)
        except TargetError as exc:
            log.warning("cannot claim flow run %s: %s", run.name, exc)
            return False
        if not change.accepted:
            log.info("flow run %s not claimed: %s", run.name, change.reason)
        return change.accepted

    def _hand(self, child: subprocess.Popen[str], run: FlowRunState) -> None:
        assert child.stdin is not None
        child.stdin.write(f"{run.id}\n")
        child.stdin.flush()
        self.started[run.id] = Started(child, run.name)
        log.info("running flow run %s (%s) in pid %d", run.name, run.id, child.pid)

    def _watch(self) -> None:
        for flow_run_id, started in list(self.started.items()):
            try:
                self._watch_one(flow_run_id, started)
            except TargetError as exc:
                log.warning("cannot read flow run %s: %s", started.name, exc)

    def _watch_one(self, flow_run_id: str, started: Started) -> None:
        exited = started.process.poll() is not None
        run = self.api.flow_run(flow_run_id)
        if exited:
            del self.started[flow_run_id]
            if not run.final:
                why = f"its process exited with {started.process.returncode} without a final state"
                self.api.set_flow_run_state(flow_run_id, "CRASHED", "Crashed", why)
                log.error("flow run %s crashed: %s", started.name, why)
            return
        if run.state_type != "CANCELLING":
            return
        if started.terminated_at is None:
            log.info("flow run %s cancelled: SIGTERM to pid %d", started.name, started.process.pid)
            started.process.send_signal(signal.SIGTERM)
            started.terminated_at = time.monotonic()
        elif time.monotonic() - started.terminated_at > KILL_AFTER_S:
            log.warning("flow run %s outlived its grace: SIGKILL", started.name)
            started.process.kill()


@contextmanager
def _stop_on_signals(runner: WarmRunner) -> Iterator[None]:
    def stop(signum: int, _frame: FrameType | None) -> None:
        runner.stopping = True

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.warm", description=__doc__)
    parser.add_argument("--deployment", default=DEPLOYMENT, help="FLOW/DEPLOYMENT to run")
    parser.add_argument("--poll", type=float, default=POLL_S, help="seconds between queries")
    parser.add_argument("--standby", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.standby:
        return standby()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    # It asks Prefect for due runs five times a second: one log line a request would be
    # 400,000 lines a day of nothing.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    api_url = os.environ.get("PREFECT_API_URL")
    if not api_url:
        parser.error("PREFECT_API_URL is not set")
    with PrefectRest(api_url) as api:
        runner = WarmRunner(api, args.deployment, args.poll)
        with _stop_on_signals(runner):
            runner.serve()
    return 0


__all__ = ["WarmRunner", "main", "standby"]

if __name__ == "__main__":
    sys.exit(main())
