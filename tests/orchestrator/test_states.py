"""State changes against a real Prefect server: a lost answer, forced bookkeeping, and the
warm runner's handling of runs whose process is gone."""

from __future__ import annotations

import logging
import subprocess
import sys
from typing import Any

import httpx
import pytest

from drills.errors import PermanentError, TemporaryError
from drills.orchestrator import warm_runner as warm
from drills.orchestrator.flow_runs import cancel_flow_run
from drills.orchestrator.rest import PrefectRest


def new_run(api: PrefectRest, *states: str) -> str:
    """A flow run (no deployment, no infrastructure) moved through the given states."""
    flow = api._call("POST", "flows/", {"name": "drills-state-tests"})
    run = api._call("POST", "flow_runs/", {"flow_id": flow["id"], "state": {"type": "SCHEDULED"}})
    for state in states:
        change = api.set_flow_run_state(run["id"], state, state.capitalize(), "test", force=True)
        assert change.accepted, change
    return str(run["id"])


class LosesFirstAnswer(httpx.HTTPTransport):
    """Forwards every request, but loses the answer to the first set_state once it is made."""

    def __init__(self) -> None:
        super().__init__()
        self.lost = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.url.path.endswith("/set_state") and not self.lost:
            self.lost += 1
            response.read()
            raise httpx.ReadError("connection reset", request=request)
        return response


def test_a_change_whose_answer_was_lost_counts_as_made(api: PrefectRest) -> None:
    run_id = new_run(api)
    transport = LosesFirstAnswer()
    api._client = httpx.Client(base_url=api.api_url + "/", transport=transport)
    change = api.set_flow_run_state(run_id, "PENDING", "Pending", "claimed")
    assert transport.lost == 1
    assert change.accepted and change.state_type == "PENDING", change
    assert api.flow_run(run_id).state_type == "PENDING"


def test_an_answer_that_is_not_json_is_temporary() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>proxy</html>")

    rest = PrefectRest("http://prefect.invalid/api")
    rest._client = httpx.Client(base_url=rest.api_url + "/", transport=httpx.MockTransport(handler))
    with pytest.raises(TemporaryError, match="not JSON"):
        rest.workers("pool")


def test_cancel_counts_when_prefect_cancels_outright(api: PrefectRest) -> None:
    # Suspended (paused, its process gone): Prefect rejects Cancelling and makes it Cancelled.
    run_id = new_run(api, "PENDING", "RUNNING")
    suspended = {"type": "PAUSED", "name": "Suspended", "state_details": {"pause_reschedule": True}}
    api._call("POST", f"flow_runs/{run_id}/set_state", {"state": suspended, "force": True})
    outcome = cancel_flow_run(api, run_id, "from the test")
    assert outcome.accepted and outcome.state_name == "Cancelled", outcome
    assert api.flow_run(run_id).state_type == "CANCELLED"


def exited_process() -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.PIPE)
    process.wait()
    return process


@pytest.mark.parametrize(
    ("states", "settled"),
    [
        # Prefect refuses any move out of Cancelling but to Cancelled.
        (("PENDING", "RUNNING", "CANCELLING"), "CANCELLED"),
        (("PENDING", "RUNNING"), "CRASHED"),
    ],
    ids=["cancelling-ends-cancelled", "running-ends-crashed"],
)
def test_a_run_whose_process_died_is_settled(
    api: PrefectRest, states: tuple[str, ...], settled: str
) -> None:
    run_id = new_run(api, *states)
    runner = warm.WarmRunner(api, warm.DEPLOYMENT)
    runner.started[run_id] = warm.Started(exited_process(), "dead-incident")
    runner._watch()
    assert run_id not in runner.started
    assert api.flow_run(run_id).state_type == settled


def test_a_deleted_run_is_no_longer_watched(api: PrefectRest) -> None:
    run_id = new_run(api, "PENDING", "RUNNING")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        api._call("DELETE", f"flow_runs/{run_id}")
        runner = warm.WarmRunner(api, warm.DEPLOYMENT)
        runner.started[run_id] = warm.Started(live, "deleted")
        runner._watch()
        assert run_id not in runner.started
    finally:
        live.kill()
        live.wait()


def test_a_run_claimed_for_a_dead_standby_goes_back_to_the_worker(
    api: PrefectRest, caplog: pytest.LogCaptureFixture
) -> None:
    run_id = new_run(api)
    runner = warm.WarmRunner(api, warm.DEPLOYMENT)
    [run] = [r for r in api.active_flow_runs() if r.id == run_id] or [api.flow_run(run_id)]
    assert runner._claim(run)
    standby: Any = object.__new__(warm.Standby)
    standby.process = exited_process()
    runner.standby = standby
    with caplog.at_level(logging.INFO):
        runner._hand(run)
    assert run_id not in runner.started and runner.standby is None
    assert api.flow_run(run_id).state_type == "SCHEDULED"
    assert "scheduled again for the worker" in caplog.text


def test_the_runner_serves_the_incident_deployment_only() -> None:
    with pytest.raises(SystemExit) as exited:
        warm.main(["--deployment", "minimum-takeover-drill/quarterly-drill"])
    assert exited.value.code == 2


def test_a_pools_command_is_set_and_a_pool_without_one_is_refused(api: PrefectRest) -> None:
    from prefect.workers.process import ProcessWorker

    # As `prefect work-pool create --type process` makes it: the process worker's template.
    template = ProcessWorker.get_default_base_job_template()
    pool = {"name": "drills-command-test", "type": "process", "base_job_template": template}
    api._call("POST", "work_pools/", pool)
    api.set_work_pool_command("drills-command-test", "python -m prefect.engine")
    template = api._call("GET", "work_pools/drills-command-test")["base_job_template"]
    assert template["variables"]["properties"]["command"]["default"] == "python -m prefect.engine"

    # A pool that a bare POST makes has an empty template: no command to set.
    api._call("POST", "work_pools/", {"name": "drills-no-command", "type": "process"})
    with pytest.raises(PermanentError, match="work pool drills-no-command has no command"):
        api.set_work_pool_command("drills-no-command", "python -m prefect.engine")
