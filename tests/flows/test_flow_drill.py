"""The takeover drill as a Prefect flow: phases as task runs, the approval pause, artifacts,
and an incident's T0 — on a lab of its own, under the session's Prefect test server."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import pytest
import yaml

from drills.plan import load_plan
from drills.store.details import Approval
from drills.store.history import HistoryStore
from drills_lab import topology
from drills_lab.runtime import LabInfo
from tests.support.drill import lab_plan, snapshot
from tests.support.services import own_lab

pytestmark = pytest.mark.usefixtures("prefect_harness")


@pytest.fixture(scope="module")
def flow_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    """A lab of its own: the drills here change it (and must put it back)."""
    with own_lab(tmp_path_factory, "flow-lab", ready_delay=0.2) as info:
        yield info


def plan_file(info: LabInfo, change: Callable[[dict[str, Any]], None]) -> Path:
    """Like ``lab_plan``, but the flow takes a path: the variant is written beside the lab's."""
    data = yaml.safe_load((Path(info.state_dir) / "plan.yaml").read_text())
    change(data)
    path = Path(info.state_dir) / f"flow-variant-{uuid.uuid4().hex[:8]}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def approval_within(timeout: str) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["approval"] = {"required": True, "timeout": timeout}

    return change


def read_artifacts(flow_run_id: str) -> dict[str, Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    async def read() -> dict[str, Any]:
        async with get_client() as client:
            found = await client.read_artifacts(
                artifact_filter=ArtifactFilter(
                    flow_run_id=ArtifactFilterFlowRunId(any_=[UUID(flow_run_id)])
                )
            )
            return {a.key: a for a in found if a.key}

    return asyncio.run(read())


def task_run_names(flow_run_id: str) -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import TaskRunSort

    async def read() -> list[str]:
        async with get_client() as client:
            runs = await client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[UUID(flow_run_id)])),
                sort=TaskRunSort.EXPECTED_START_TIME_ASC,
            )
            return [r.name for r in runs if r.state and r.state.is_completed()]

    return asyncio.run(read())


def approve_when_paused(reason: str, answer: dict[str, Any]) -> str:
    """A person in the Prefect UI: waits for the paused run with our reason, then answers."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState
    from prefect.client.schemas.filters import FlowRunFilterStateType as StateTypes
    from prefect.client.schemas.objects import StateType
    from prefect.flow_runs import resume_flow_run

    paused = FlowRunFilter(state=FlowRunFilterState(type=StateTypes(any_=[StateType.PAUSED])))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with get_client(sync_client=True) as client:
            for run in client.read_flow_runs(flow_run_filter=paused):
                if run.parameters.get("reason") == reason:
                    resume_flow_run(run.id, run_input=answer)
                    return str(run.id)
        time.sleep(0.2)
    raise TimeoutError(f"no paused run with reason {reason!r} within 60 s")


def test_flow_waits_for_approval_then_drills_and_publishes_its_report(flow_lab: LabInfo) -> None:
    from flows.artifacts import artifact_key
    from flows.drill import minimum_takeover_drill

    path = plan_file(flow_lab, approval_within("60s"))
    before = snapshot(load_plan(path))
    reason = f"approved-{uuid.uuid4().hex[:6]}"
    answer = {"approved": True, "approver": "lead-sre", "comment": "go"}
    with ThreadPoolExecutor(1) as pool:
        resumed = pool.submit(approve_when_paused, reason, answer)
        summary = minimum_takeover_drill(
            plan=str(path), operator="tests", reason=reason, tier_deadline_s=20
        )
        assert resumed.result(timeout=5) == summary["flow_run_id"]
    assert summary["status"] == "succeeded" and summary["verdict"] == "met", summary
    assert 0 < summary["rto_seconds"] < summary["client_rto_seconds"]
    assert summary["rto_seconds"] < summary["full_capacity_seconds"]
    assert set(summary["rpo_seconds"]) == {d.name for d in topology.DATASETS}
    assert snapshot(load_plan(path)) == before

    stored = HistoryStore().get_run(summary["run_id"])
    assert stored is not None and stored.flow_run_id == summary["flow_run_id"]
    assert stored.details.approval == Approval(approved=True, approver="lead-sre", comment="go")
    # Each phase that changes something ran as a task run of its own, in order.
    assert task_run_names(summary["flow_run_id"]) == [
        "fence",
        "bring-up",
        "dns",
        "smoke",
        "full-capacity",
        "validation jobs",
        "failback",
    ]

    artifacts = read_artifacts(summary["flow_run_id"])
    report = artifacts[artifact_key("drill-report", "lab")].data
    assert f"Drill report `{summary['run_id']}`" in report
    assert "Approval:** approved by lead-sre" in report
    assert "Identical to the snapshot taken before the drill." in report
    assert "| full capacity (normal tier ready) |" in report
    # The lab plan's validation job, in the report artifact as in the report.
    assert "## Validation jobs at DR" in report and "wrote s3://ckpt-dr/" in report
    table = artifacts[artifact_key("drill-phases", "lab")].data
    rows = json.loads(table) if isinstance(table, str) else table
    assert [r["phase"] for r in rows] == [p["name"] for p in stored.timeline]
    assert all(r["status"] == "ok" for r in rows), rows


def test_an_approval_nobody_gives_times_out_and_changes_nothing(flow_lab: LabInfo) -> None:
    from flows.artifacts import artifact_key
    from flows.drill import minimum_takeover_drill

    path = plan_file(flow_lab, approval_within("2s"))
    before = snapshot(load_plan(path))
    reason = f"unanswered-{uuid.uuid4().hex[:6]}"
    started = time.monotonic()
    state = minimum_takeover_drill(
        plan=str(path), operator="tests", reason=reason, return_state=True
    )
    waited = time.monotonic() - started
    assert state.is_failed(), state
    assert waited < 30  # the pause polls often enough not to overrun a short window
    runs = HistoryStore().list_runs(plan="lab", limit=5)
    run = next(r for r in runs if r.reason == reason)
    assert run.status == "aborted" and "approval timed out after 2 s" in (run.error or "")
    assert run.timeline[-1]["name"] == "approve"
    assert snapshot(load_plan(path)) == before
    assert httpx.get(flow_lab.endpoints["primary"]).status_code == 200
    # The report is published even though the run failed: that is when it is needed most.
    artifacts = read_artifacts(str(state.state_details.flow_run_id))
    report = artifacts[artifact_key("drill-report", "lab")].data
    assert "**Status:** aborted" in report and "No change was made." in report


def test_an_incident_counts_rto_from_the_declaration(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An incident is left failed over, so it gets a lab of its own, and a history of its
    own: the session's would say its plan serves from DR, and refuse later takeovers."""
    from flows.drill import minimum_takeover_drill

    monkeypatch.setenv("DRILLS_DB_URL", f"sqlite:///{tmp_path / 'incident-history.db'}")
    with own_lab(tmp_path_factory, "incident-flow-lab", ready_delay=0.2) as info:
        declared = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=40)
        summary = minimum_takeover_drill(
            plan=str(Path(info.state_dir) / "plan.yaml"),
            mode="incident",
            operator="on-call",
            reason="primary region down",
            declared_at=declared.isoformat(),
            tier_deadline_s=20,
        )
        assert summary["status"] == "succeeded", summary
        stored = HistoryStore().get_run(summary["run_id"])
        assert stored is not None and stored.t0 == declared
        assert stored.mode == "incident" and stored.operator == "on-call"
        # The RTO clock started at the declaration, not when the flow started.
        assert 40 <= summary["rto_seconds"] < 40 + 60
        assert httpx.get(info.endpoints["dr"]).text == "dr\n"
        assert httpx.get(info.endpoints["primary"]).status_code == 503
        assert snapshot(lab_plan(info))["api.drills.test./A"]["values"] == [topology.DR_ADDR]


def test_the_approval_form_says_what_approving_does_by_mode(tmp_path: Path) -> None:
    """A failback's approver is not told that approving fences the primary: its form says
    what a failback does, in the words the terminal's prompt uses too."""
    from drills.takeover.drill import DrillRequest, approval_question
    from flows.drill import approval_form_text
    from tests.support.drill import offline_lab_plan_text

    path = tmp_path / "plan.yaml"
    path.write_text(offline_lab_plan_text())
    plan = load_plan(path)
    texts = {
        mode: approval_form_text(DrillRequest(plan, mode=mode, operator="alice", reason="home"))
        for mode in ("drill", "incident", "failback")
    }
    failback = texts["failback"]
    assert failback.startswith("**Approve the failback of lab?**")
    assert "stops the DR writers" in failback and "switches DNS back" in failback
    assert "fences" not in failback and "brings DR up" not in failback
    assert "Operator: alice. Reason: home." in failback
    for mode in ("drill", "incident"):
        assert "fences the primary site and brings DR up" in texts[mode], texts[mode]
    question, effect = approval_question(DrillRequest(plan, mode="failback"))
    assert failback.startswith(f"**{question}** {effect}")


def test_a_scheduled_practice_in_a_blocked_window_is_skipped_not_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.drill import minimum_takeover_drill
    from tests.support.drill import offline_lab_plan_data

    monkeypatch.setenv("DRILLS_DB_URL", f"sqlite:///{tmp_path / 'skipped-history.db'}")
    data = offline_lab_plan_data()
    data["gates"] = {"blocked_windows": [{"name": "freeze", "dates": [
        (dt.datetime.now(dt.UTC) + dt.timedelta(days=d)).date().isoformat() for d in (-1, 0, 1)
    ]}]}  # fmt: skip
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    state = minimum_takeover_drill(
        plan=str(path), mode="practice", scheduled=True, operator="prefect-schedule",
        return_state=True,
    )  # fmt: skip
    assert state.is_completed(), state
    assert "skipped" in (state.message or "") and "freeze" in (state.message or "")
    [run] = HistoryStore().list_runs(plan="lab")
    assert (run.mode, run.status, run.verdict) == ("practice", "skipped", None)
    practice = approval_question_of(path, "practice")
    assert "not fenced" in practice and "returns it to standby" in practice


def approval_question_of(path: Path, mode: str) -> str:
    from drills.takeover.drill import DrillRequest, approval_question

    return " ".join(approval_question(DrillRequest(load_plan(path), mode=mode)))
