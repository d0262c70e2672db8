"""The Fleet page's DR cost column: what each state of a plan's figures reads as."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import yaml

from drills.capacity.figures import DrFigures
from drills.plan import plan_from_text
from drills.store.fleet import PlanFacts
from tests.support.drill import offline_lab_plan_data
from ui.fleet import dr_cost_text, fleet_row

NOW = dt.datetime.now(dt.UTC)


def _figures(cost: float | None) -> DrFigures:
    return DrFigures("lab", 24, 7, None, 1.0, "allocation", "EUR", cost and cost / 730, cost,
                     NOW.timestamp())  # fmt: skip


def test_dr_cost_never_reads_as_free(tmp_path: Path) -> None:
    data = offline_lab_plan_data()
    plain = plan_from_text(yaml.safe_dump(data))
    data["cost"] = {"pricing": str(tmp_path / "pricing.json")}
    costed = plan_from_text(yaml.safe_dump(data))
    assert dr_cost_text(plain, _figures(1000.0)) == "—"  # no cost section: not asked
    assert dr_cost_text(costed, None) == "not measured yet"
    assert dr_cost_text(costed, _figures(None)) == "unpriced GPU nodes"
    assert dr_cost_text(costed, _figures(43624.8)) == "EUR 43,625"
    row = fleet_row(costed, PlanFacts("lab"), None, NOW, _figures(43624.8))
    assert row.dr_cost == "EUR 43,625"
