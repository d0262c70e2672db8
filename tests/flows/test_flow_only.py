"""The flows take `only`, as `drills run --only` and `drills readiness --application` do: the
readiness of one application is its view's, never stored as the plan's snapshot; an
application the plan does not have fails the flow run in one line naming the ones it has."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from prefect.states import State

from drills.checks.base import CheckContext, CheckRegistry, Outcome, Status
from drills.store.history import HistoryStore
from flows.drill import minimum_takeover_drill
from flows.readiness import readiness_flow
from tests.support.checks import catalogued_check
from tests.support.drill import offline_lab_plan_data


@pytest.fixture()
def plan_file(tmp_path: Path) -> Path:
    data = offline_lab_plan_data()
    data["applications"] = [
        {"name": "training", "workloads": ["training/trainer", "training/data-loader"]},
        {"name": "platform", "workloads": ["platform/model-registry"]},
    ]
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_the_readiness_flow_checks_one_applications_view_and_does_not_store_it(
    prefect_harness: None, plan_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = CheckRegistry()

    @catalogued_check(
        registry, "test.workloads", title="Workloads", category="Cadence", timeout_s=30
    )
    def workloads(ctx: CheckContext) -> Outcome:
        """Names the workloads of the plan it was given."""
        return Outcome(Status.PASS, " ".join(w.key for w in ctx.plan.workloads))

    db = f"sqlite:///{tmp_path / 'h.db'}"
    monkeypatch.setenv("DRILLS_DB_URL", db)
    flow = readiness_flow(registry)
    training = flow(plan=str(plan_file), only="training")
    [result] = training["results"]
    assert "training/trainer" in result["summary"] and "serving/llm-server" in result["summary"]
    assert "platform/model-registry" not in result["summary"]
    assert HistoryStore(db).latest_readiness("lab") is None  # one application's: not the plan's
    whole = flow(plan=str(plan_file))
    assert "platform/model-registry" in whole["results"][0]["summary"]
    assert HistoryStore(db).latest_readiness("lab") is not None


@pytest.mark.parametrize(
    ("only", "mode", "said"),
    [
        ("billing", "drill", "plan lab has no application 'billing' (its applications: "
                             "training, platform)"),
        ("training", "failback", "only does not apply to a failback"),
    ],
)  # fmt: skip
def test_the_drill_flow_refuses_an_unknown_application_or_a_failback_of_one(
    prefect_harness: None,
    plan_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    only: str,
    mode: str,
    said: str,
) -> None:
    monkeypatch.setenv("DRILLS_DB_URL", f"sqlite:///{tmp_path / 'h.db'}")
    state: State[Any] = minimum_takeover_drill(
        plan=str(plan_file), mode=mode, only=only, return_state=True
    )
    assert state.is_failed()
    assert said in str(state.message) or said in repr(state.result(raise_on_failure=False))
