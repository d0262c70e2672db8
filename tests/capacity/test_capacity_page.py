"""The dashboard's Capacity page: the report of `drills capacity` for the plans with a cost
section, and what it says when there are none."""

from __future__ import annotations

from pathlib import Path

from drills_lab import topology
from drills_lab.runtime import LabInfo
from tests.support.ui import UiEnv, open_page, shown


def test_the_capacity_page_shows_the_lab_report(ui_env: UiEnv, capacity_lab: LabInfo) -> None:
    ui_env.set("DRILLS_PLANS", str(Path(capacity_lab.state_dir) / "plan.yaml"))
    at = open_page("capacity")
    assert at.title[0].value == "Capacity"
    dr_gpus = sum(p.count * p.gpus for p in topology.SITES["dr"].pools)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Reserved at DR"] == f"{dr_gpus} GPUs"
    assert metrics["Standby cost a month"] == f"USD {2.49 * dr_gpus * 730:,.2f}"
    assert at.success[0].value.startswith("Reserve ")
    table = at.dataframe[0].value
    assert list(table["model"]) == ["NVIDIA-H100-80GB-HBM3"]
    assert int(table["allocatable"][0]) == dr_gpus
    # Used over time, from the lab's Prometheus: a chart of GPUs busy against reserved/needed.
    assert at.get("vega_lite_chart"), shown(at)
    assert "Used: the GPUs busy at DR (DCGM)" in shown(at)


def test_without_a_cost_section_the_page_says_how_to_get_one(ui_env: UiEnv) -> None:
    at = open_page("capacity")  # the example plan: no cost section
    assert "No plan has a `cost` section" in shown(at)
