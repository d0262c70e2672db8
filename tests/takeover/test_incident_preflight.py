"""The readiness preflight: beside the takeover in an incident, before it in a drill.

An incident cannot be stopped by its readiness checks, so it does not wait for them:
the fence starts while they run, and their result is still the run's readiness at T0,
in the store and the report. A drill still stops on a blocking failure before any
change. Either way the guards before the first change (two sites that are two, a
primary seen) stay before the fence. And each step is in the store as it ends.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from drills.checks.base import CheckContext, CheckRegistry, Outcome, Status
from drills.store.history import HistoryStore
from drills.store.report import report_data
from drills.takeover.drill import Drill, DrillHooks, DrillRequest
from drills.takeover.journal import Journal
from drills.takeover.timeline import PhaseRecord, StepRecord
from drills_lab.runtime import LabInfo
from tests.support.checks import catalogued_check
from tests.support.drill import lab_plan, snapshot
from tests.support.services import own_lab

SLOW_CHECK = "tests.waits-for-the-fence"
FAILING_CHECK = "tests.always-blocks"


@pytest.fixture()
def history(tmp_path: Path) -> HistoryStore:
    return HistoryStore(f"sqlite:///{tmp_path / 'history.db'}")


@pytest.fixture(scope="module")
def preflight_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    """A lab of its own for the drill that must not change it."""
    with own_lab(tmp_path_factory, "preflight-lab", ready_delay=0.2) as info:
        yield info


def failing_registry() -> CheckRegistry:
    registry = CheckRegistry()

    @catalogued_check(
        registry, FAILING_CHECK, title="Always blocks", category="Cluster", timeout_s=10
    )
    def always_blocks(ctx: CheckContext) -> Outcome:
        """Fails, blocking: a critical tier that is not ready."""
        return Outcome(Status.FAIL, "blocks on purpose", blocking=True)

    return registry


def stored_phase(history: HistoryStore, run_id: str, name: str) -> dict[str, Any]:
    run = history.get_run(run_id)
    assert run is not None
    return next(p for p in run.timeline if p["name"] == name)


def test_an_incident_fences_before_its_readiness_checks_end_and_keeps_them(
    tmp_path_factory: pytest.TempPathFactory, history: HistoryStore
) -> None:
    fence_ended = threading.Event()
    registry = failing_registry()

    @catalogued_check(
        registry, SLOW_CHECK, title="Waits for the fence", category="Cluster", timeout_s=60
    )
    def waits_for_the_fence(ctx: CheckContext) -> Outcome:
        """Passes once the takeover has fenced the primary: a check slower than the fence."""
        fenced = fence_ended.wait(45)
        return Outcome(Status.PASS if fenced else Status.ERROR, f"fence ended first: {fenced}")

    def listener(event: str, phase: PhaseRecord, step: StepRecord | None) -> None:
        if event == "phase-end" and phase.name == "fence":
            fence_ended.set()

    with own_lab(tmp_path_factory, "incident-beside-lab", ready_delay=0.2) as info:
        plan = lab_plan(info)
        request = DrillRequest(plan, mode="incident", operator="tests", tier_deadline_s=30)
        hooks = DrillHooks(listener=listener, checks=registry)
        result = Drill(request, history, hooks).run()
    assert result.status == "succeeded", result.error

    preflight = stored_phase(history, result.run_id, "preflight")
    fence = stored_phase(history, result.run_id, "fence")
    steps = {s["name"]: s for s in preflight["steps"]}
    readiness_step = steps["readiness checks"]
    # The guards before the first change still ran before it.
    assert steps["primary and DR are distinct"]["result"].startswith("pass")
    assert steps["site endpoints seen from outside"]["status"] == "ok"
    assert preflight["ended_at"] <= fence["started_at"]
    # The readiness checks were still running when the fence began, and ended after it.
    at = dt.datetime.fromisoformat
    assert at(readiness_step["started_at"]) < at(fence["started_at"])
    assert at(readiness_step["ended_at"]) > at(fence["ended_at"])
    assert readiness_step["evidence"]["beside_takeover"] is True
    assert readiness_step["evidence"]["blocking"] == [FAILING_CHECK]
    assert "recorded and continuing (incident)" in readiness_step["result"]

    # Complete, as the run's readiness at T0, in the store and in the report.
    stored = history.get_run(result.run_id)
    assert stored is not None
    results = {r["id"]: r for r in stored.readiness["results"]}
    assert set(results) == {SLOW_CHECK, FAILING_CHECK}
    assert results[SLOW_CHECK]["status"] == "pass"
    assert results[FAILING_CHECK]["blocking"] is True
    report = report_data(stored, history)
    assert {r["id"] for r in report["readiness"]["results"]} == {SLOW_CHECK, FAILING_CHECK}
    assert history.latest_readiness(plan.name) is not None


def test_a_drill_still_stops_on_a_blocking_check_before_any_change(
    preflight_lab: LabInfo, history: HistoryStore
) -> None:
    plan = lab_plan(preflight_lab)
    before = snapshot(plan)
    request = DrillRequest(plan, operator="tests", tier_deadline_s=20)
    result = Drill(request, history, DrillHooks(checks=failing_registry())).run()
    assert result.status == "aborted"
    assert FAILING_CHECK in (result.error or "")
    assert [p.name for p in result.timeline.phases] == ["preflight"]
    assert Journal(history, result.run_id).changes() == []
    assert snapshot(plan) == before


def test_a_drill_without_sites_distinct_in_its_registry_runs_drills_own(
    preflight_lab: LabInfo, history: HistoryStore
) -> None:
    """A custom registry that lacks sites.distinct does not skip the guard of a drill."""
    plan = lab_plan(preflight_lab)
    request = DrillRequest(plan, operator="tests", dry_run=True)
    result = Drill(request, history, DrillHooks(checks=CheckRegistry())).run()
    assert result.status == "dry-run", result.error
    preflight = next(p for p in result.timeline.phases if p.name == "preflight")
    guard = next(s for s in preflight.steps if s.name == "primary and DR are distinct")
    assert guard.result.startswith("pass"), guard.result


def test_each_step_is_in_the_store_as_it_ends(stalled_lab: LabInfo, history: HistoryStore) -> None:
    """A drill stalled in bring-up: its finished steps are readable while the phase runs."""
    plan = lab_plan(stalled_lab)
    before = snapshot(plan)
    request = DrillRequest(plan, operator="tests", tier_deadline_s=15)
    drill = Drill(request, history)
    outcome: list[Any] = []
    runner = threading.Thread(target=lambda: outcome.append(drill.run()), daemon=True)
    runner.start()
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and runner.is_alive() and not seen:
        run = history.get_run(drill.run_id)
        phases = (run.timeline if run else None) or []
        bring_up = [p for p in phases if p["name"] == "bring-up" and p["ended_at"] is None]
        seen = [s for p in bring_up for s in p["steps"] if s["status"] == "ok"]
        time.sleep(0.05)
    runner.join(120)
    assert seen, "no finished step of the running bring-up phase was ever in the store"
    assert all(s["ended_at"] for s in seen)
    assert outcome and outcome[0].status == "rolled-back", outcome
    assert snapshot(plan) == before
