"""Each check's deadline counts from when it starts, not from when the run did; a check
given up at its deadline gives its slot back, so the checks queued behind it still run."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from drills.checks.base import CheckContext, CheckRegistry, Outcome, Status
from drills.checks.checkup import check_context
from drills.checks.runner import run_checks
from drills.plan import load_plan
from drills.targets.sites import Targets
from tests.support.checks import catalogued_check
from tests.support.drill import offline_lab_plan_data


@pytest.fixture()
def context(tmp_path: Path) -> Iterator[CheckContext]:
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(json.dumps(offline_lab_plan_data()))
    plan = load_plan(plan_file)
    with Targets(plan) as targets:
        yield check_context(plan, targets, None)


def _registry(hold_s: float, slow_timeout: float, release: threading.Event) -> CheckRegistry:
    registry = CheckRegistry()
    for n in (1, 2):

        @catalogued_check(registry, f"test.slow{n}", title="Slow", category="Cadence",
                          timeout_s=slow_timeout)  # fmt: skip
        def slow(ctx: CheckContext) -> Outcome:
            """Holds its slot until released or its time is up."""
            release.wait(hold_s)
            return Outcome(Status.PASS, "took its time")

    @catalogued_check(registry, "test.quick", title="Quick", category="Cadence", timeout_s=1)
    def quick(ctx: CheckContext) -> Outcome:
        """Answers at once."""
        return Outcome(Status.PASS, "answered at once")

    return registry


def test_a_quick_check_queued_behind_slow_ones_keeps_its_own_deadline(
    context: CheckContext,
) -> None:
    """Two slots, two checks of 2 s in them: the 1 s check starts at 2 s and passes."""
    release = threading.Event()
    report = run_checks(_registry(2.0, 10, release).all(), context, max_workers=2)
    by_id = {r.id: r for r in report.results}
    assert by_id["test.quick"].status is Status.PASS, by_id["test.quick"].summary
    assert by_id["test.slow1"].status is Status.PASS and by_id["test.slow2"].status is Status.PASS


def test_checks_that_hang_give_their_slots_back_at_their_deadline(
    context: CheckContext,
) -> None:
    """Both slots held by checks that hang: each is an error at 1 s, and the queued check
    then runs in the slot it gave back, long before the hung ones would end."""
    release = threading.Event()
    started = time.monotonic()
    try:
        report = run_checks(_registry(60.0, 1, release).all(), context, max_workers=2)
    finally:
        release.set()
    elapsed = time.monotonic() - started
    by_id = {r.id: r for r in report.results}
    assert by_id["test.slow1"].status is Status.ERROR
    assert by_id["test.slow1"].summary == "timed out after 1 s"
    assert by_id["test.quick"].status is Status.PASS, by_id["test.quick"].summary
    assert elapsed < 30, elapsed
