"""Which due incident runs the warm runner takes, against a real Prefect server: the run
declared a moment ago before any left over from long ago, and every run it leaves to the
worker named in its log with the reason."""

from __future__ import annotations

import datetime as dt
import logging
import os
import subprocess
import sys
import uuid
from typing import Any

import pytest

from drills.launch.deployment_runs import start
from drills.orchestrator import warm_runner as warm
from drills.orchestrator.names import WARM_HEAD_START_S
from drills.orchestrator.rest import PrefectRest
from drills.orchestrator.serve import ServeInfo, worker_env

STALE_RUNS = 12  # more than a page of the runner's query


@pytest.fixture
def deployment_id(api: PrefectRest) -> str:
    """A deployment of its own (nobody serves it), as a demo's server keeps them."""
    flow = api._call("POST", "flows/", {"name": "drills-warm-claims"})
    name = f"declare-incident-{uuid.uuid4().hex[:8]}"
    created = api._call("POST", "deployments/", {"name": name, "flow_id": flow["id"]})
    return str(created["id"])


def scheduled_run(api: PrefectRest, deployment_id: str, due: dt.datetime) -> str:
    body = {
        "parameters": {},
        "state": {"type": "SCHEDULED", "state_details": {"scheduled_time": due.isoformat()}},
    }
    return str(api._call("POST", f"deployments/{deployment_id}/create_flow_run", body)["id"])


def importing_standby() -> Any:
    """A standby that has not said it is ready: a live process that prints nothing."""
    standby: Any = object.__new__(warm.Standby)
    standby.process = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    standby._out = standby.process.stdout.fileno()
    os.set_blocking(standby._out, False)
    standby._seen, standby.ready, standby.announced = b"", False, False
    return standby


def test_a_new_declaration_comes_before_runs_left_from_long_ago(
    api: PrefectRest, deployment_id: str
) -> None:
    now = dt.datetime.now(dt.UTC)
    for hours in range(STALE_RUNS):
        scheduled_run(api, deployment_id, now - dt.timedelta(hours=hours + 1))
    later = scheduled_run(api, deployment_id, now + dt.timedelta(hours=1))
    declared = scheduled_run(api, deployment_id, now)
    due = warm.WarmRunner(api, warm.DEPLOYMENT)._due(deployment_id)
    assert due[0].id == declared, [r.name for r in due]
    assert later not in {r.id for r in due}  # not due yet: nobody's to take
    assert len(due) == 10


def test_a_run_it_cannot_start_is_left_to_the_worker_and_says_why(
    api: PrefectRest, deployment_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    declared = scheduled_run(api, deployment_id, dt.datetime.now(dt.UTC))
    runner = warm.WarmRunner(api, warm.DEPLOYMENT)
    runner.standby = importing_standby()
    try:
        with caplog.at_level(logging.INFO, logger="drills.orchestrator.warm"):
            runner._step(deployment_id)
            runner._step(deployment_id)  # said once, not at every poll
        left = [r.getMessage() for r in caplog.records if "left to the worker" in r.getMessage()]
        assert left == [
            f"flow run {api.flow_run(declared).name} ({declared}) left to the worker: its"
            f" standby (pid {runner.standby.process.pid}) is still importing"
        ]
        # Still Scheduled: the worker's next poll starts it.
        assert api.flow_run(declared).state_type == "SCHEDULED"
        assert runner.started == {}
    finally:
        runner.standby.stop()


def test_a_claim_refused_is_left_to_the_worker_and_says_why(
    api: PrefectRest, deployment_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    declared = scheduled_run(api, deployment_id, dt.datetime.now(dt.UTC))
    [seen] = [r for r in api.due_flow_runs(deployment_id) if r.id == declared]
    taken = api.set_flow_run_state(declared, "PENDING", "Pending", "claimed by a worker")
    assert taken.accepted, taken
    runner = warm.WarmRunner(api, warm.DEPLOYMENT)
    with caplog.at_level(logging.INFO, logger="drills.orchestrator.warm"):
        assert not runner._claim(seen)  # the worker was first
    assert f"flow run {seen.name} ({declared}) left to the worker: Prefect refused" in caplog.text
    assert api.flow_run(declared).message == "claimed by a worker"


def test_a_declaration_is_the_warm_runners_before_the_worker_sees_it(api: PrefectRest) -> None:
    """The worker `drills serve` starts asks its pool for runs due WARM_HEAD_START_S ago, as
    Prefect's worker asks (``scheduled_before`` = now + its prefetch, truncated): a run
    declared just now is not in that answer, and is in the warm runner's. With Prefect's
    default prefetch (10 s ahead) the worker would see it at once: the race this closes."""
    pool = f"drills-warm-claims-{uuid.uuid4().hex[:8]}"
    api._call("POST", "work_pools/", {"name": pool, "type": "process"})
    flow = api._call("POST", "flows/", {"name": "drills-warm-claims"})
    name = f"declare-incident-{uuid.uuid4().hex[:8]}"
    body = {"name": name, "flow_id": flow["id"], "work_pool_name": pool}
    deployment_id = str(api._call("POST", "deployments/", body)["id"])
    declared = start(api, f"drills-warm-claims/{name}", {}).id
    # Due at once (the warm runner's query, due by now, finds it below): a run due later
    # would be held by Prefect until then, the warm runner's start too.
    assert api.flow_run(declared).state_type == "SCHEDULED"

    def worker_sees(prefetch: str) -> set[str]:
        before = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=int(float(prefetch)))
        query = {"scheduled_before": before.isoformat()}
        found = api._call("POST", f"work_pools/{pool}/get_scheduled_flow_runs", query)
        return {str(run["flow_run"]["id"]) for run in found}

    info = ServeInfo(
        state_dir="s", project_dir="p", api_url="http://127.0.0.1:1/api", ui_url="u",
        db_url="sqlite:///h.db", server_pid=1, worker_pid=None, started_at="t",
    )  # fmt: skip
    prefetch = worker_env(info)["PREFECT_WORKER_PREFETCH_SECONDS"]
    assert float(prefetch) == -WARM_HEAD_START_S
    assert declared not in worker_sees(prefetch)
    assert declared in {r.id for r in api.due_flow_runs(deployment_id)}  # due now
    assert declared in {r.id for r in warm.WarmRunner(api, warm.DEPLOYMENT)._due(deployment_id)}
    assert declared in worker_sees("10")  # Prefect's default
