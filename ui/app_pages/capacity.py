"""Capacity: what each plan's DR pool costs, how idle it is, and its right size (the report
of `drills capacity`, for the plans with a `cost` section)."""

from __future__ import annotations

from typing import Any

import pandas as pd  # type: ignore[import-untyped]
import streamlit as st

from ui import data
from ui.settings import load_settings

KEY = "capacity"


def _money(report: dict[str, Any], value: float | None) -> str:
    return "unpriced" if value is None else f"{report['currency']} {value:,.2f}"


def _report(report: dict[str, Any]) -> None:
    rec = report["recommendation"]
    (st.error if rec["missing_gpus"] else st.success)(rec["text"])
    gpus = report["dr_gpus"]
    needed = report["needed_target_gpus"]
    cols = st.columns(4)
    cols[0].metric("Reserved at DR", f"{gpus['reserved']} GPUs", help="Kept for the takeover")
    cols[1].metric(
        "Needed", f"{report['needed_minimum_gpus']} GPUs",
        help="gpu × dr_replicas over the critical and normal tiers",
    )  # fmt: skip
    cols[2].metric("Standby cost a month", _money(report, report["standby_cost_per_month"]),
                   help="Reserved GPUs × price × 730 h")  # fmt: skip
    cols[3].metric(f"Idle ({report['idle_source']})", f"{report['idle_ratio']:.1%}")
    if needed is not None:
        st.caption(f"For the target: {needed} GPUs — {report['needed_target_note']}")
    else:
        st.caption(f"No target: {report['needed_target_note']}.")
    for note in filter(None, (report["idle_note"], report["pricing_note"], *report["notes"])):
        st.warning(note)
    if gpus["unpriced_nodes"]:
        st.error("Unpriced GPU nodes: " + ", ".join(gpus["unpriced_nodes"]))
    st.subheader("GPUs at DR by model", divider="gray")
    st.dataframe(pd.DataFrame(gpus["by_model"]), hide_index=True, width="stretch")
    e = report["effective_compute"]
    st.caption(
        f"Effective compute {e['gpus']:.1f} GPUs = {e['physical_gpus']} physical × "
        f"{e['availability']:.0%} available × {e['utilization']:.0%} utilized; "
        f"{report['preemptible_gpus']} GPUs could run preemptible work."
    )


def main() -> None:
    settings = load_settings()
    st.title("Capacity")
    costed = [e for e in data.plans(settings) if e.plan is not None and e.plan.cost is not None]
    if not costed:
        st.info("No plan has a `cost` section (a pricing file, a Prometheus, a demand): see "
                "*Cost and right-size the DR pool* in the docs.")  # fmt: skip
        return
    names = [e.name for e in costed]
    chosen = st.selectbox("Plan", names, key=f"{KEY}.plan")
    entry = costed[names.index(chosen)]
    report = data.capacity_report(entry.path)
    if "error" in report:
        st.error(f"The report could not be made: {report['error']}")
        return
    _report(report)


main()
