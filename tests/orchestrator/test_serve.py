"""`drills serve` end to end: a real Prefect server, the deployments of prefect.yaml, a
process worker that runs deployments' flow runs, cancelling them from Prefect and from
the dashboard, and a stop that leaves nothing behind.

One server for the module on purpose: it alone takes 15–30 s to start on a small
machine. The tests run in file order; the last one stops it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from drills.orchestrator import serve
from drills.orchestrator.plan_schedule import deployment_schedules
from drills.orchestrator.rest import FlowRunState, PrefectRest, describe_schedule
from drills.plan import DrillPlan, load_plan
from drills.processes import descendants, pid_alive
from drills.store.history import HistoryStore
from drills.store.models import AuditEvent, RunStatus
from drills.takeover.journal import Journal
from drills.takeover.snapshot import Snapshot
from drills_lab.procs import free_port
from drills_lab.runtime import LabInfo
from tests.support.cli import drills_process
from tests.support.demo import leave_demo_state
from tests.support.drill import back_to_normal, lab_plan, serving, snapshot
from tests.support.ui import UiEnv, declare, fill_declaration, open_page, shown

PROJECT_DIR = Path(__file__).resolve().parents[2]
# The worker gives a cancelled flow run 30 s to exit; a rollback that waited out its
# 10-minute tier deadline would be killed, and the run left unfinished.
CANCELLED_WITHIN_S = 120


def drills(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return drills_process(args, timeout=timeout, cwd=PROJECT_DIR)


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


def wait_final(api_url: str, flow_run_id: str, timeout: float = CANCELLED_WITHIN_S) -> FlowRunState:
    deadline = time.monotonic() + timeout
    with PrefectRest(api_url) as api:
        while time.monotonic() < deadline:
            run = api.flow_run(flow_run_id)
            if run.final:
                return run
            time.sleep(0.5)
    raise AssertionError(f"flow run {flow_run_id} did not end within {timeout:.0f}s")


def wait_dr_change(history: HistoryStore, flow_run_id: str, timeout: float = 180) -> str:
    """Wait until the flow run's drill has journalled a change at DR; returns its run id."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for run in history.list_runs(limit=20):
            if run.flow_run_id != flow_run_id:
                continue
            assert run.finished_at is None, (run.status, run.error)
            if any(c.target.startswith("dr/") for c in Journal(history, run.id).changes()):
                return run.id
        time.sleep(0.1)
    raise AssertionError(f"the drill of flow run {flow_run_id} never changed DR")


@dataclass(frozen=True)
class Served:
    state: Path
    api_url: str
    info: serve.ServeInfo
    history: HistoryStore
    project: Path  # where its worker runs the flows: not this checkout

    def start(self, deployment: str, **parameters: str) -> str:
        """Start a run of the deployment without following it; returns the flow run id."""
        args = [f"{k}={v}" for k, v in parameters.items()]
        started = drills(
            "serve", "run", deployment, "--state-dir", str(self.state), "--no-wait",
            *[a for arg in args for a in ("-p", arg)],
        )  # fmt: skip
        assert started.returncode == 0, started.stderr
        return started.stderr.strip().rsplit("/", 1)[-1]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, _history_db: str) -> Iterator[Served]:
    state = tmp_path_factory.mktemp("serve") / "prefect-local"
    # A project of its own, holding no prefect.yaml (the one drills ships is deployed) but
    # what a demo leaves behind: its worker and warm runner work there, unmoved by it.
    project = tmp_path_factory.mktemp("serve-project")
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    leave_demo_state(project, server_pid=gone.pid)  # its server is gone, as after `make down`
    port = free_port()
    token = project / "receiver-token"  # the Alertmanager receiver's, by reference
    token.write_text("serve-test-receiver-token\n")
    try:
        started = drills(
            "serve", "--state-dir", str(state), "--port", str(port), "--project-dir", str(project),
            "--receiver-token", f"file:{token}", "--receiver-port", str(free_port()),
        )  # fmt: skip
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"http://127.0.0.1:{port}" in started.stdout
        info = serve.read_info(state)
        assert info is not None and info.worker_pid is not None
        assert info.receiver_url in started.stdout  # the alert receiver beside them
        yield Served(state, info.api_url, info, HistoryStore(_history_db), project)
    finally:
        if serve.running(state) is not None:  # the last test stops it; this is for failures
            drills("serve", "stop", "--force", "--state-dir", str(state), timeout=90)


@pytest.mark.slow
def test_serve_deploys_and_runs_a_deployment_on_its_worker(
    served: Served, lab: LabInfo, _history_db: str
) -> None:
    info = served.info
    assert Path(info.project_dir) == served.project
    # Everything Prefect writes stays in the state directory.
    assert (served.state / "home" / "prefect.db").exists()

    again = drills("serve", "--state-dir", str(served.state))
    assert again.returncode == 0 and "Already running" in again.stdout

    status = json.loads(
        drills("serve", "status", "--json", "--state-dir", str(served.state)).stdout
    )
    assert status["healthy"] and status["workers"][0]["status"] == "ONLINE"
    assert status["warm_running"] and status["warm_pid"] == info.warm_pid
    assert status["receiver_running"] and status["receiver_pid"] == info.receiver_pid
    by_name = {d["name"]: d for d in status["deployments"]}
    assert set(by_name) == {
        "quarterly-drill", "weekly-practice", "readiness-check", "declare-incident", "failback",
        "recover-orphans",
    }  # fmt: skip
    # The practice keeps its own weekly cron: the plan's `schedule:` is the drill's.
    assert by_name["weekly-practice"]["schedules"] == ["cron 0 4 * * 1 (UTC)"]
    assert by_name["weekly-practice"]["parameters"]["mode"] == "practice"
    assert by_name["weekly-practice"]["parameters"]["scheduled"] is True
    assert by_name["recover-orphans"]["schedules"] == ["every 1 min"]
    # prefect.yaml carries no cron for it: serve deploys the `schedule:` of the plan it runs.
    drill_plan = Path(info.project_dir) / by_name["quarterly-drill"]["parameters"]["plan"]
    assert drill_plan.exists(), drill_plan  # the project's own plan: a schedule to compare
    planned = [describe_schedule(s) for s in deployment_schedules(load_plan(drill_plan))]
    assert planned, "the project's plan names a schedule"
    assert by_name["quarterly-drill"]["schedules"] == planned
    assert by_name["readiness-check"]["schedules"] == ["every 15 min"]
    assert by_name["declare-incident"]["schedules"] == []
    assert by_name["declare-incident"]["parameters"]["mode"] == "incident"
    assert by_name["failback"]["schedules"] == []
    assert by_name["failback"]["parameters"]["mode"] == "failback"
    stored = httpx.get(
        f"{info.api_url}/deployments/name/minimum-takeover-drill/quarterly-drill"
    ).json()
    assert stored["global_concurrency_limit"]["limit"] == 1
    # The worker finds the project through its environment, not a path in the deployment.
    assert json.dumps(stored["pull_steps"]).count("{{ $DRILLS_PROJECT_DIR }}") == 1
    # Its flow runs start Prefect's engine at once, on drills' interpreter (no workspace
    # supervisor importing Prefect first).
    pool = httpx.get(f"{info.api_url}/work_pools/{serve.WORK_POOL}").json()
    command = pool["base_job_template"]["variables"]["properties"]["command"]["default"]
    assert command == shlex.join([sys.executable, "-m", "prefect.engine"])

    plan = str(Path(lab.state_dir) / "plan.yaml")
    ran = drills(
        "serve", "run", "quarterly-drill", "--state-dir", str(served.state), "--timeout", "180",
        "-p", f"plan={plan}", "-p", "dry_run=true", "-p", "reason=serve test",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Completed" in ran.stderr
    # Followed step by step, each step printed as the run stored it.
    assert "preflight: readiness checks ok" in ran.stderr, ran.stderr
    assert "preflight: site endpoints seen from outside ok" in ran.stderr, ran.stderr
    assert "(dry run)" in ran.stdout and "## Intended changes (dry run)" in ran.stdout
    # The worker wrote the history store the CLI reads: one store, whoever runs the drill.
    runs = HistoryStore(_history_db).list_runs(limit=50)
    runs = [r for r in runs if r.reason == "serve test"]
    assert len(runs) == 1 and runs[0].status == "dry-run" and runs[0].flow_run_id
    assert runs[0].operator != "prefect-schedule"  # a person started it: `drills serve run`


def assert_rolled_back(history: HistoryStore, run_id: str, final: FlowRunState) -> None:
    """The flow run ended Cancelled and its drill undid every change, in the history too."""
    assert final.state_type == "CANCELLED", final
    assert run_id in final.message  # the flow said so itself, not only the worker
    run = history.get_run(run_id)
    assert run is not None and run.status == "cancelled" and run.finished_at is not None
    assert run.error and "cancelled by SIGTERM" in run.error
    assert {c.state for c in Journal(history, run_id).changes()} <= {"undone", "failed"}
    assert [p["name"] for p in run.timeline][-2:] == ["rollback", "verify rollback"]
    assert history.unfinished_runs(run.plan) == []


@dataclass(frozen=True)
class Stage:
    plan: DrillPlan
    plan_file: str
    original: Snapshot  # the stalled lab before the test: every test must leave it so


@pytest.fixture()
def stage(stalled_lab: LabInfo) -> Stage:
    """The stalled lab's plan, and its state before the test."""
    plan = lab_plan(stalled_lab)
    return Stage(plan, str(Path(stalled_lab.state_dir) / "plan.yaml"), snapshot(plan))


@pytest.fixture()
def on_dashboard(stage: Stage, served: Served, ui_env: UiEnv, _history_db: str) -> Stage:
    """The dashboard in lab mode, on the served Prefect and the store its worker writes,
    with the stalled lab's plan."""
    ui_env.set("DRILLS_DB_URL", _history_db)
    ui_env.set("PREFECT_API_URL", served.api_url)
    ui_env.set("DRILLS_PLANS", stage.plan_file)
    ui_env.set("DRILLS_UI_LAB", "1")
    return stage


@pytest.mark.slow
def test_cancelling_the_flow_run_in_prefect_rolls_the_drill_back(
    served: Served, stage: Stage
) -> None:
    flow_run_id = served.start("quarterly-drill", plan=stage.plan_file, reason="in prefect")
    run_id = wait_dr_change(served.history, flow_run_id)
    # What Prefect's own UI and `prefect flow-run cancel` send.
    answer = httpx.post(
        f"{served.api_url}/flow_runs/{flow_run_id}/set_state",
        json={"state": {"type": "CANCELLING", "name": "Cancelling", "message": "from the UI"}},
    )
    assert answer.status_code in (200, 201) and answer.json()["status"] == "ACCEPT", answer.text
    assert_rolled_back(served.history, run_id, wait_final(served.api_url, flow_run_id))
    assert snapshot(stage.plan) == stage.original


def audited_cancels(history: HistoryStore, flow_run_id: str) -> list[AuditEvent]:
    with history.session() as s:
        events = s.query(AuditEvent).filter(AuditEvent.action == "cancel-run").all()
        return [e for e in events if (e.detail or {}).get("flow_run_id") == flow_run_id]


@pytest.mark.slow
def test_cancelling_a_drill_from_the_dashboard_rolls_it_back(
    served: Served, on_dashboard: Stage
) -> None:
    flow_run_id = served.start(
        "quarterly-drill", plan=on_dashboard.plan_file, reason="cancelled from the dashboard"
    )
    run_id = wait_dr_change(served.history, flow_run_id)
    at = open_page("history")
    at.selectbox(key="history.run").set_value(run_id).run()
    cancel = at.button(key=f"history.{run_id}.cancel")
    assert cancel.label == "Cancel the drill run" and cancel.disabled  # until confirmed
    at.checkbox(key=f"history.{run_id}.cancel_sure").check().run()
    at.button(key=f"history.{run_id}.cancel").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Cancel requested" in shown(at), shown(at)
    assert_rolled_back(served.history, run_id, wait_final(served.api_url, flow_run_id))
    assert snapshot(on_dashboard.plan) == on_dashboard.original
    [event] = audited_cancels(served.history, flow_run_id)
    assert event.accepted and event.plan == "lab" and event.detail["run_id"] == run_id


@pytest.mark.slow
def test_stopping_an_incident_from_the_declare_page_holds_it_and_reports(
    served: Served, on_dashboard: Stage, stalled_lab: LabInfo, _history_db: str
) -> None:
    at = open_page("declare")
    declare(fill_declaration(at, operator="carol", reason="region down", confirmation="lab"))
    flow_run_id = at.query_params["flow_run"]
    flow_run_id = flow_run_id[0] if isinstance(flow_run_id, list) else flow_run_id
    run_id = ""
    try:
        run_id = wait_dr_change(served.history, flow_run_id)
        at.run()  # what the live view's timer does
        at.checkbox(key="declare.cancel_sure").check().run()
        at.button(key="declare.cancel").click().run()
        assert "Cancel requested" in shown(at), shown(at)
        final = wait_final(served.api_url, flow_run_id)
        assert final.state_type == "CANCELLED", final
        # The warm runner started it (before the worker's next poll) and stopped it.
        warm_log = served.info.logs["warm"].read_text()
        assert f"({flow_run_id}) in pid" in warm_log, warm_log[-2000:]
        assert "cancelled: SIGTERM" in warm_log, warm_log[-2000:]
        at.run()
        page = shown(at)
        assert "The incident run ended cancelled" in page, page
        assert "--complete" in page and "--hold" in page
        run = served.history.get_run(run_id)
        assert run is not None and run.status == "cancelled"
        # Stopped, not failed back: the primary stays fenced, the journal says what is done.
        assert not serving(stalled_lab.endpoints["primary"])
        states = {c.state for c in Journal(served.history, run_id).changes()}
        assert "applied" in states and "undone" not in states
        [event] = audited_cancels(served.history, flow_run_id)
        assert event.accepted and event.who == "carol" and event.detail["run_id"] == run_id
        # Stopped part-way, it holds the plan: a new declaration says what to decide first.
        again = open_page("declare")
        declare(fill_declaration(again, operator="dave", reason="again", confirmation="lab"))
        refusal = " ".join(e.value for e in again.error)
        assert f"drills recover {run_id} --complete" in refusal, refusal
        held = drills("recover", run_id, "--hold", "--db", _history_db)
        assert held.returncode == 0, held.stdout + held.stderr
        assert served.history.unfinished_runs("lab") == []
    finally:
        if run_id:
            back_to_normal(on_dashboard.plan, served.history, run_id)
    assert snapshot(on_dashboard.plan) == on_dashboard.original


REASON = "serve test approval"


@pytest.mark.slow
def test_stop_refuses_while_a_run_is_active_and_force_stops_everything(
    served: Served, lab: LabInfo, _history_db: str
) -> None:
    info, state = served.info, served.state
    # A drill waiting for approval holds a flow-run process of its own session.
    flow_run_id = served.start("quarterly-drill", plan=str(approval_plan(lab)), reason=REASON)
    wait_for_state(info.api_url, flow_run_id, "PAUSED")
    refused = drills("serve", "stop", "--state-dir", str(state))
    assert refused.returncode == 1 and "still active" in refused.stderr
    assert serve.running(state) is not None

    tree = [info.server_pid, info.worker_pid, *descendants(info.server_pid)]
    assert info.worker_pid is not None and info.warm_pid is not None
    tree += descendants(info.worker_pid)
    tree += [info.warm_pid, *descendants(info.warm_pid)]  # with its standby
    assert info.receiver_pid is not None and pid_alive(info.receiver_pid)
    tree.append(info.receiver_pid)  # the alert receiver stops with the rest
    assert len(tree) >= 3, tree  # the paused flow run's process is among them
    # A process of serve's whose parent died before the stop: out of every tree, still found.
    orphan_out = served.state / "orphan.pid"
    subprocess.run(
        ["sh", "-c", f"sleep 600 & echo $! > {orphan_out}"], check=True, timeout=10,
        env={**os.environ, serve.SERVE_MARK_ENV: str(state.resolve())},
    )  # fmt: skip
    orphan = int(orphan_out.read_text())
    assert pid_alive(orphan) and orphan not in descendants(info.server_pid)
    tree.append(orphan)
    stopped = drills("serve", "stop", "--force", "--state-dir", str(state), timeout=90)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert [pid for pid in tree if pid_alive(pid)] == []
    # The drill that waited for approval ends in one of two consistent states. Prefect's
    # worker sends the flow run SIGINT on its first SIGTERM and SIGKILL on a second; the
    # stop signals its group and then each process, and the kernel merges two SIGTERMs
    # still pending. Killed, its run is unfinished, and the plan refuses new drills until
    # an operator recovers it, as one would. Given the time to cancel, it changed nothing
    # and says so.
    [paused] = [
        r for r in HistoryStore(_history_db).list_runs(plan="lab", limit=1000) if r.reason == REASON
    ]
    if paused.finished_at is None:
        recovered = drills("recover", paused.id, "--db", _history_db)
        assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    else:
        assert paused.status == RunStatus.CANCELLED, (paused.status, paused.error)
    assert HistoryStore(_history_db).unfinished_runs("lab") == []
    assert serve.running(state) is None
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{info.api_url}/health", timeout=2)
