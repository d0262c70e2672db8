"""The readiness flow's all_plans: every plan of DRILLS_PLANS in one flow run, each result
returned and each snapshot kept, under the session's Prefect test server."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from drills.store.history import HistoryStore
from drills_lab.runtime import LabInfo

pytestmark = pytest.mark.usefixtures("prefect_harness")


def test_the_readiness_flow_checks_every_plan_with_all_plans(
    lab: LabInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.readiness import readiness_check

    data = yaml.safe_load((Path(lab.state_dir) / "plan.yaml").read_text())
    names = ["flow-all-a", "flow-all-b", "flow-all-c"]
    kept = tmp_path / "checkpoints"
    for name in names:  # beside the lab's plan: their file references resolve
        # One plan names where its chain's checkpoints are kept outside the store.
        place = {"evidence": {"checkpoints": str(kept)}} if name == "flow-all-a" else {}
        (Path(lab.state_dir) / f"{name}.yaml").write_text(
            yaml.safe_dump({**data, "name": name, **place}, sort_keys=False)
        )
    (tmp_path / "broken.yaml").write_text("name: [not, a, plan]\n")
    db = tmp_path / "h.db"
    monkeypatch.setenv("DRILLS_DB_URL", f"sqlite:///{db}")
    monkeypatch.setenv("DRILLS_PLANS", f"{lab.state_dir}/flow-all-*.yaml,{tmp_path}/broken.yaml")
    monkeypatch.delenv("DRILLS_NOTIFY", raising=False)

    state = readiness_check(all_plans=True, concurrency=2, return_state=True)
    assert state.is_completed(), state
    body = state.result()
    by_plan = {p["plan"]: p for p in body["plans"]}
    assert set(by_plan) == {*names, "broken.yaml"}
    assert (
        by_plan["broken.yaml"]["report"] is None
        and "invalid plan" in by_plan["broken.yaml"]["error"]
    )
    for name in names:
        report = by_plan[name]["report"]
        assert report is not None and by_plan[name]["error"] is None
        assert by_plan[name]["blocking"] == 0, report
    assert body["ok"] is False  # the invalid file
    history = HistoryStore(f"sqlite:///{db}")
    assert {n for n in names if history.latest_readiness(n) is not None} == set(names)
    # Once a day: the plan that names a place has its checkpoint there, and only it.
    assert [p.parent.name for p in kept.glob("*/*.json")] == ["flow-all-a"]
    state = readiness_check(all_plans=True, concurrency=2, return_state=True)
    assert state.is_completed(), state
    assert len(list(kept.glob("*/*.json"))) == 1  # not due again the same day
