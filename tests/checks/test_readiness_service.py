"""Running a plan's checks returns results and keeps nothing; the readiness service keeps
the snapshot, and after a run asks again only the checks a run's record changes."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from drills.checks.base import CheckContext, CheckRegistry, Outcome, Status
from drills.checks.checkup import check_plan
from drills.checks.readiness import AFTER_A_RUN, refresh_after_run, run_readiness
from drills.plan import DrillPlan, load_plan
from drills.store.history import HistoryStore
from tests.support.checks import catalogued_check
from tests.support.drill import offline_lab_plan_data


@pytest.fixture()
def plan(tmp_path: Path) -> DrillPlan:
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(json.dumps(offline_lab_plan_data()))
    return load_plan(plan_file)


@pytest.fixture()
def history(tmp_path: Path) -> HistoryStore:
    return HistoryStore(f"sqlite:///{tmp_path / 'history.db'}")


class Scripted:
    """Checks whose answers the test sets, counting how often each was asked."""

    def __init__(self, ids: tuple[str, ...]) -> None:
        self.status = dict.fromkeys(ids, Status.PASS)
        self.asked: Counter[str] = Counter()
        self.registry = CheckRegistry()
        for check_id in ids:
            self._register(check_id)

    def _register(self, check_id: str) -> None:
        @catalogued_check(self.registry, check_id, title=check_id, category="Cadence",
                          timeout_s=5)  # fmt: skip
        def scripted(ctx: CheckContext) -> Outcome:
            """Answers what the test set, and counts the asking."""
            self.asked[check_id] += 1
            status = self.status[check_id]
            return Outcome(status, f"{check_id} {status.value}", blocking=status is Status.FAIL)


def test_running_the_checks_keeps_nothing_and_the_service_keeps_the_snapshot(
    plan: DrillPlan, history: HistoryStore
) -> None:
    checks = Scripted(("images.synced", "drill.cadence"))
    checks.status["drill.cadence"] = Status.FAIL
    ran = check_plan(plan, checks.registry.all(), history=history)
    assert [(r.id, r.status) for r in ran.results] == [
        ("images.synced", Status.PASS),
        ("drill.cadence", Status.FAIL),
    ]
    assert history.latest_readiness(plan.name) is None
    kept = run_readiness(plan, history=history, registry=checks.registry)
    stored = history.latest_readiness(plan.name)
    assert stored is not None and stored.blocking == 1 and not stored.ok
    assert [r["id"] for r in stored.report["results"]] == [r.id for r in kept.results]


def test_after_a_run_only_the_checks_its_record_changes_are_asked_again_and_kept(
    plan: DrillPlan, history: HistoryStore
) -> None:
    checks = Scripted(("images.synced", *AFTER_A_RUN))
    checks.status["drill.cadence"] = Status.FAIL  # never drilled, before the run
    preflight = run_readiness(plan, history=history, registry=checks.registry)
    checks.status["drill.cadence"] = Status.PASS  # the run is recorded now
    refreshed = refresh_after_run(plan, history, preflight, registry=checks.registry)
    assert checks.asked == Counter({"images.synced": 1, "drill.cadence": 2, "forecast.rto": 2})
    statuses = {r.id: r.status for r in refreshed.results}
    assert statuses == dict.fromkeys(("images.synced", *AFTER_A_RUN), Status.PASS)
    assert refreshed.results[0] is preflight.results[0]  # the preflight's, not asked again
    stored = history.latest_readiness(plan.name)
    assert stored is not None and stored.ok and stored.checked_at >= preflight.checked_at


def test_after_a_run_without_those_checks_the_preflight_stands_and_nothing_is_kept(
    plan: DrillPlan, history: HistoryStore
) -> None:
    checks = Scripted(("images.synced",))
    preflight = check_plan(plan, checks.registry.all(), history=history)
    assert refresh_after_run(plan, history, preflight, registry=checks.registry) is preflight
    assert checks.asked == Counter({"images.synced": 1})
    assert history.latest_readiness(plan.name) is None
