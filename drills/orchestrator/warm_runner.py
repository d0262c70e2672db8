"""A warm runner for the `declare-incident` deployment: the click to the fence in seconds.

A process worker finds a flow run on its next poll, then starts a new Python that
imports Prefect, the flow and drills before the flow's first line: seconds that a
known-broken primary goes on taking writes. This runner, started beside the worker
by `drills serve`, keeps one *standby* process with all of that already imported,
and asks Prefect for due runs of the one deployment a few times a second. It claims a
run as a worker does, by moving it to Pending (Prefect's orchestration lets exactly
one claimant win, so it and the worker never both run it), hands its id to the
standby, which runs the flow at once, and starts the next standby. The latest declared
run comes first, so a run left over from long ago never takes the standby a new
declaration needs. A due run it does not start (no standby ready yet, a claim refused or
lost) stays Scheduled for the worker, which starts it on its next poll; the runner's log
says which run and why.

It does what a worker does for the runs it started: a run cancelled in Prefect (its
UI, the dashboard's Cancel) gets SIGTERM, on which an incident stops and reports,
and SIGKILL after the same grace a worker gives; a run whose process died without a
final state is marked Crashed (Cancelled when it was being cancelled).

The standby is ``flows.warm_standby``, beside the flows: it imports Prefect and the flow,
which nothing in drills/ may; this runner only speaks to Prefect's REST API.

    python -m drills.orchestrator.warm_runner --deployment minimum-takeover-drill/declare-incident
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

from drills.errors import PermanentError, TargetError
from drills.orchestrator.names import (
    INCIDENT_DEPLOYMENT,
    STANDBY_READY_LINE,
    WARM_READY,
    WARM_RUNNER_MODULE,
    WARM_STANDBY_MODULE,
)
from drills.orchestrator.rest import FlowRunState, PrefectRest, auth_headers

log = logging.getLogger("drills.orchestrator.warm")

DEPLOYMENT = INCIDENT_DEPLOYMENT  # the standby runs minimum_takeover_drill, nothing else
POLL_S = 0.2
STANDBY_BACKOFF_S = 1.0  # after a standby dies importing; doubled each time in a row
STANDBY_BACKOFF_MAX_S = 60.0
KILL_AFTER_S = 30.0  # as a Prefect worker: SIGKILL a cancelled run 30 s after SIGTERM


# -- the runner: claims due runs, hands them to the standby, watches them ------------
@dataclass
class Started:
    process: subprocess.Popen[bytes]
    name: str
    terminated_at: float | None = None


class Standby:
    """A standby process, and whether it has said it is ready; read without blocking, so
    the runner goes on watching its runs while the next standby imports."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", WARM_STANDBY_MODULE],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip
        assert self.process.stdout is not None
        self._out = self.process.stdout.fileno()
        os.set_blocking(self._out, False)
        self._seen = b""
        self.ready = False
        self.announced = False  # its ready line logged

    def check(self) -> bool | None:
        """True once ready, False while importing, None when it exited (and was reaped)."""
        if self.process.poll() is not None:
            self.process.wait()
            return None
        if self.ready:
            return True
        try:
            chunk = os.read(self._out, 4096)
        except BlockingIOError:
            return False
        if not chunk:  # EOF without the ready line: it is exiting
            self.process.wait()
            return None
        self._seen += chunk
        self.ready = STANDBY_READY_LINE.encode() in self._seen.splitlines()
        return self.ready

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


class WarmRunner:
    def __init__(self, api: PrefectRest, deployment: str, poll_s: float = POLL_S) -> None:
        self.api = api
        self.deployment = deployment
        self.poll_s = poll_s
        self.started: dict[str, Started] = {}
        self.stopping = False
        self.standby: Standby | None = None
        self._failures = 0  # standbys in a row that exited before they were ready
        self._next_spawn = 0.0  # monotonic time before which no standby is started
        self._left: set[str] = set()  # due runs left to the worker, each said once

    def serve(self) -> None:
        deployment_id = self.api.deployment(self.deployment).id
        try:
            while not self.stopping:
                # The top-level loop: an error nothing below expected must not end the
                # runner, which would leave the runs it started unwatched and the next
                # incident to the worker's cold start. Log it with its cause and go on.
                try:
                    self._step(deployment_id)
                except Exception:
                    log.exception("warm runner: unexpected error; going on")
                time.sleep(self.poll_s)
        finally:
            if self.standby is not None:
                self.standby.stop()

    def _step(self, deployment_id: str) -> None:
        ready = self._tend_standby()
        due = self._due(deployment_id)
        self._left &= {run.id for run in due}  # forget runs that are no longer due
        for run in due:  # the latest declared first: never behind a run left from long ago
            if not ready or self.standby is None or self.standby.check() is not True:
                self._leave(run, self._why_no_standby())
            elif self._claim(run):
                self._hand(run)
                ready = False  # the next standby has yet to start
        self._watch()

    def _why_no_standby(self) -> str:
        if self.stopping:
            return "the warm runner is stopping"
        if self.standby is not None:
            return f"its standby (pid {self.standby.process.pid}) is still importing"
        if not self._failures:
            return "the standby went to a run declared later; the next one is starting"
        wait = max(self._next_spawn - time.monotonic(), 0.0)
        return (
            f"no standby: {self._failures} in a row exited before they were ready, the next"
            f" starts in {wait:.0f}s"
        )

    def _leave(self, run: FlowRunState, why: str) -> None:
        """A due run this runner does not start: the worker starts it on its next poll.
        Said once a run, with why, so that a cold start is never a mystery."""
        if run.id not in self._left:
            self._left.add(run.id)
            log.warning("flow run %s (%s) left to the worker: %s", run.name, run.id, why)

    def _tend_standby(self) -> bool:
        """Whether a standby is ready; starts one when there is none (backing off while
        they keep dying), never once the runner is stopping."""
        if self.standby is not None:
            state = self.standby.check()
            if state is None:
                self._standby_died(self.standby.process.returncode)
                self.standby = None
            elif state:
                if not self.standby.announced:
                    log.info(
                        "warm runner for %s %s %d)", self.deployment, WARM_READY,
                        self.standby.process.pid,
                    )  # fmt: skip
                    self.standby.announced = True
                self._failures = 0
                return True
        if self.standby is None and not self.stopping and time.monotonic() >= self._next_spawn:
            self.standby = Standby()
        return False

    def _standby_died(self, returncode: int | None) -> None:
        self._failures += 1
        delay = min(STANDBY_BACKOFF_S * 2 ** (self._failures - 1), STANDBY_BACKOFF_MAX_S)
        self._next_spawn = time.monotonic() + delay
        log.error(
            "a standby exited before it was ready (exit %s, %d in a row); the next in %.0fs,"
            " meanwhile the worker runs incidents from a cold start (see the standby's error"
            " above)", returncode, self._failures, delay,
        )  # fmt: skip

    def _due(self, deployment_id: str) -> list[FlowRunState]:
        try:
            return self.api.due_flow_runs(deployment_id)
        except TargetError as exc:
            log.warning(
                "cannot list the runs of %s (%s); the worker starts any due meanwhile",
                self.deployment, exc,
            )  # fmt: skip
            return []

    def _claim(self, run: FlowRunState) -> bool:
        message = f"claimed by the drills warm runner (pid {os.getpid()})"
        try:
            change = self.api.set_flow_run_state(run.id, "PENDING", "Pending", message)
        except TargetError as exc:
            # The claim may have been made and its answer lost: then the run is ours, and
            # leaving it would strand it in Pending, started by nobody.
            if self._claimed_by_us(run, message):
                return True
            self._leave(run, f"cannot claim it: {exc}")
            return False
        if not change.accepted:
            self._leave(run, f"Prefect refused the claim ({change.reason})")
        return change.accepted

    def _claimed_by_us(self, run: FlowRunState, message: str) -> bool:
        try:
            now = self.api.flow_run(run.id)
        except TargetError:
            return False
        return now.state_type == "PENDING" and now.message == message

    def _hand(self, run: FlowRunState) -> None:
        assert self.standby is not None and self.standby.process.stdin is not None
        child, self.standby = self.standby.process, None  # the next poll starts another
        try:
            assert child.stdin is not None
            child.stdin.write(f"{run.id}\n".encode())
            child.stdin.flush()
        except OSError as exc:  # the standby died after the claim
            log.error("the standby died before taking flow run %s (%s)", run.name, exc)
            child.kill()
            child.wait()
            self._give_back(run)
            return
        self.started[run.id] = Started(child, run.name)
        log.info("running flow run %s (%s) in pid %d", run.name, run.id, child.pid)

    def _give_back(self, run: FlowRunState) -> None:
        """A claimed run nobody will start: Scheduled again, for the worker to take."""
        why = "the drills warm runner's standby died before starting it"
        try:
            change = self.api.set_flow_run_state(run.id, "SCHEDULED", "Scheduled", why, force=True)
        except TargetError as exc:
            log.error("flow run %s stays Pending, owned by nobody: %s", run.name, exc)
            return
        if change.accepted:
            log.info("flow run %s scheduled again for the worker", run.name)
        else:
            log.error("flow run %s not scheduled again: %s", run.name, change.reason)

    def _watch(self) -> None:
        for flow_run_id, started in list(self.started.items()):
            try:
                self._watch_one(flow_run_id, started)
            except PermanentError as exc:  # deleted from Prefect, say: nothing to watch
                log.warning("no longer watching flow run %s: %s", started.name, exc)
                self.started.pop(flow_run_id, None)
            except TargetError as exc:
                log.warning("cannot read flow run %s: %s", started.name, exc)

    def _watch_one(self, flow_run_id: str, started: Started) -> None:
        if started.process.poll() is not None:
            self._settle(flow_run_id, started)
            # Dropped once settled; a temporary error above keeps it for the next poll.
            del self.started[flow_run_id]
            return
        run = self.api.flow_run(flow_run_id)
        if run.state_type != "CANCELLING":
            return
        if started.terminated_at is None:
            log.info("flow run %s cancelled: SIGTERM to pid %d", started.name, started.process.pid)
            started.process.send_signal(signal.SIGTERM)
            started.terminated_at = time.monotonic()
        elif time.monotonic() - started.terminated_at > KILL_AFTER_S:
            log.warning("flow run %s outlived its grace: SIGKILL", started.name)
            started.process.kill()

    def _settle(self, flow_run_id: str, started: Started) -> None:
        """A final state for a run whose process exited without one, as a worker gives:
        Cancelled when it was being cancelled, else Crashed. Forced: Prefect's rules let
        a Cancelling run go nowhere but Cancelled, and these are the owner's bookkeeping."""
        run = self.api.flow_run(flow_run_id)
        if run.final:
            return
        code = started.process.returncode
        if run.state_type == "CANCELLING":
            wanted = ("CANCELLED", "Cancelled", f"cancelled; its process exited with {code}")
        else:
            wanted = ("CRASHED", "Crashed", f"its process exited with {code} without a final state")
        change = self.api.set_flow_run_state(flow_run_id, *wanted, force=True)
        if not change.accepted:
            log.error(
                "flow run %s: Prefect did not accept %s: %s", started.name, wanted[1], change.reason
            )
        elif wanted[0] == "CRASHED":
            log.error("flow run %s crashed: %s", started.name, wanted[2])
        else:
            log.info("flow run %s cancelled: %s", started.name, wanted[2])


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
    parser = argparse.ArgumentParser(prog=f"python -m {WARM_RUNNER_MODULE}", description=__doc__)
    parser.add_argument("--deployment", default=DEPLOYMENT, help="FLOW/DEPLOYMENT to run")
    parser.add_argument("--poll", type=float, default=POLL_S, help="seconds between queries")
    args = parser.parse_args(argv)
    if args.deployment != DEPLOYMENT:
        parser.error(f"the standby runs {DEPLOYMENT} only, not {args.deployment}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    # It asks Prefect for due runs five times a second: one log line a request would be
    # 400,000 lines a day of nothing.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    api_url = os.environ.get("PREFECT_API_URL")
    if not api_url:
        parser.error("PREFECT_API_URL is not set")
    with PrefectRest(api_url, headers=auth_headers()) as api:
        runner = WarmRunner(api, args.deployment, args.poll)
        with _stop_on_signals(runner):
            runner.serve()
    return 0


__all__ = ["WarmRunner", "main"]

if __name__ == "__main__":
    sys.exit(main())
