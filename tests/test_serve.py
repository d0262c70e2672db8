"""`drills serve` end to end: a real Prefect server, the deployments of prefect.yaml, a
process worker that runs a deployment's flow run, and a stop that leaves nothing behind.

One test on purpose: the server alone takes 15–30 s to start on a small machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
import yaml

from drills import serve
from drills.history import HistoryStore
from drills.lab.procs import free_port
from drills.lab.runtime import LabInfo
from drills.prefect_rest import PrefectRest
from drills.processes import pid_alive

PROJECT_DIR = Path(__file__).resolve().parents[1]


def drills(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "drills", *args],
        capture_output=True, text=True, timeout=timeout, cwd=PROJECT_DIR,
    )  # fmt: skip


def approval_plan(info: LabInfo) -> Path:
    """The lab's plan with an approval nobody gives here, beside it so references resolve."""
    data = yaml.safe_load((Path(info.state_dir) / "plan.yaml").read_text())
    data["approval"] = {"required": True, "timeout": "10m"}
    path = Path(info.state_dir) / f"serve-approval-{uuid.uuid4().hex[:8]}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def wait_for_state(api_url: str, flow_run_id: str, state_type: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    with PrefectRest(api_url) as api:
        while time.monotonic() < deadline:
            run = api.flow_run(flow_run_id)
            if run.state_type == state_type:
                return
            assert not run.final, run
            time.sleep(0.5)
    raise AssertionError(f"flow run {flow_run_id} never reached {state_type}")


@pytest.mark.slow
def test_serve_deploys_runs_a_deployment_on_its_worker_and_stops_cleanly(
    lab: LabInfo, tmp_path: Path, _history_db: str
) -> None:
    state = tmp_path / "prefect-local"
    port = free_port()
    try:
        started = drills("serve", "--state-dir", str(state), "--port", str(port))
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"http://127.0.0.1:{port}" in started.stdout
        info = serve.read_info(state)
        assert info is not None and info.worker_pid is not None
        assert Path(info.project_dir) == PROJECT_DIR
        # Everything Prefect writes stays in the state directory.
        assert (state / "home" / "prefect.db").exists()

        again = drills("serve", "--state-dir", str(state))
        assert again.returncode == 0 and "Already running" in again.stdout

        status = json.loads(drills("serve", "status", "--json", "--state-dir", str(state)).stdout)
        assert status["healthy"] and status["workers"][0]["status"] == "ONLINE"
        by_name = {d["name"]: d for d in status["deployments"]}
        assert set(by_name) == {"quarterly-drill", "readiness-check", "declare-incident"}
        assert by_name["quarterly-drill"]["schedules"] == ["cron 0 3 1 1,4,7,10 * (UTC)"]
        assert by_name["readiness-check"]["schedules"] == ["every 15m"]
        assert by_name["declare-incident"]["schedules"] == []
        assert by_name["declare-incident"]["parameters"]["mode"] == "incident"
        stored = httpx.get(
            f"{info.api_url}/deployments/name/minimum-takeover-drill/quarterly-drill"
        ).json()
        assert stored["global_concurrency_limit"]["limit"] == 1
        # The worker finds the project through its environment, not a path in the deployment.
        assert json.dumps(stored["pull_steps"]).count("{{ $DRILLS_PROJECT_DIR }}") == 1

        plan = str(Path(lab.state_dir) / "plan.yaml")
        ran = drills(
            "serve", "run", "quarterly-drill", "--state-dir", str(state), "--timeout", "180",
            "-p", f"plan={plan}", "-p", "dry_run=true", "-p", "reason=serve test",
        )  # fmt: skip
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "Completed" in ran.stderr
        assert "(dry run)" in ran.stdout and "## Intended changes (dry run)" in ran.stdout
        # The worker wrote the history store the CLI reads: one store, whoever runs the drill.
        runs = HistoryStore(_history_db).list_runs(limit=50)
        runs = [r for r in runs if r.reason == "serve test"]
        assert len(runs) == 1 and runs[0].status == "dry-run" and runs[0].flow_run_id
        assert runs[0].operator != "prefect-schedule"  # a person started it: `drills serve run`

        # A drill waiting for approval holds a flow-run process of its own session.
        waiting = drills(
            "serve", "run", "quarterly-drill", "--state-dir", str(state), "--no-wait",
            "-p", f"plan={approval_plan(lab)}", "-p", "reason=serve test approval",
        )  # fmt: skip
        assert waiting.returncode == 0, waiting.stderr
        flow_run_id = waiting.stderr.strip().rsplit("/", 1)[-1]
        wait_for_state(info.api_url, flow_run_id, "PAUSED")
        refused = drills("serve", "stop", "--state-dir", str(state))
        assert refused.returncode == 1 and "still active" in refused.stderr
        assert serve.running(state) is not None

        tree = [info.server_pid, info.worker_pid, *serve.descendants(info.server_pid)]
        tree += serve.descendants(info.worker_pid)
        assert len(tree) >= 3, tree  # the paused flow run's process is among them
    finally:
        stopped = drills("serve", "stop", "--force", "--state-dir", str(state), timeout=90)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert [pid for pid in tree if pid_alive(pid)] == []
    # The forced stop killed the drill that waited for approval: its run is unfinished,
    # and the plan refuses new drills until an operator recovers it, as one would.
    paused = [
        r for r in HistoryStore(_history_db).unfinished_runs("lab") if r.reason.endswith("approval")
    ]
    assert len(paused) == 1
    recovered = drills("recover", paused[0].id, "--db", _history_db)
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert HistoryStore(_history_db).unfinished_runs("lab") == []
    assert serve.running(state) is None
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{info.api_url}/health", timeout=2)
