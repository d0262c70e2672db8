"""The Fleet page's "DR can carry" column: what each state of capacity.carry reads as."""

from __future__ import annotations

import datetime as dt
from typing import Any

import yaml

from drills.plan import plan_from_text
from drills.store.fleet import PlanFacts, ReadinessFacts
from tests.support.drill import offline_lab_plan_data
from ui.fleet import dr_carry_text, fleet_row

NOW = dt.datetime.now(dt.UTC)
LLM = "serving/llm-server"


def _report(status: str, missing: int = 0) -> dict[str, Any]:
    service = {"service": LLM, "gpus_needed": 3 + missing, "gpus_available": 3,
               "gpus_missing": missing}  # fmt: skip
    return {"results": [{"id": "capacity.carry", "status": status,
                         "evidence": {"services": [service]}}]}  # fmt: skip


def test_dr_can_carry_reads_the_newest_check_and_never_says_yes_on_doubt() -> None:
    data = offline_lab_plan_data()
    data["demand"] = {LLM: {"static": 36, "per_replica": 20}}
    measured = plan_from_text(yaml.safe_dump(data))
    data.pop("demand")
    plain = plan_from_text(yaml.safe_dump(data))
    assert dr_carry_text(plain, _report("pass")) == "—"  # measures no demand: not asked
    assert dr_carry_text(measured, None) == "not checked"
    assert dr_carry_text(measured, {"results": []}) == "not checked"
    assert dr_carry_text(measured, _report("pass")) == "yes"
    assert dr_carry_text(measured, _report("fail", missing=4)) == "no: 4 GPUs missing"
    assert dr_carry_text(measured, _report("warn", missing=1)) == "no: 1 GPUs missing"
    assert dr_carry_text(measured, _report("error")) == "unknown: the check errored"


def test_the_fleet_row_carries_it_from_the_plans_readiness() -> None:
    data = offline_lab_plan_data()
    data["demand"] = {LLM: {"static": 36, "per_replica": 20}}
    plan = plan_from_text(yaml.safe_dump(data))
    readiness = ReadinessFacts(1, NOW, False, 1, _report("fail", missing=2))
    row = fleet_row(plan, PlanFacts("lab", readiness=readiness), None, NOW)
    assert row.dr_can_carry == "no: 2 GPUs missing"
