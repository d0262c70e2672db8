"""Capacity: what each plan's DR pool costs, how idle it is, and its right size (the report
of `drills capacity`, for the plans with a `cost` section)."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd  # type: ignore[import-untyped]
import streamlit as st

from ui import data
from ui.settings import load_settings

KEY = "capacity"
WINDOWS = {"1 hour": 3600.0, "24 hours": 86400.0, "7 days": 7 * 86400.0}


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


def _over_time(report: dict[str, Any]) -> None:
    st.subheader("Used at DR over time", divider="gray")
    url, nodes = report.get("_prometheus"), report.get("_gpu_nodes") or []
    if not url or not nodes:
        st.caption("No Prometheus with DR's GPU metrics (`cost.prometheus`): no history to draw.")
        return
    window = st.segmented_control("Window", list(WINDOWS), default="24 hours", key=f"{KEY}.window")
    busy = data.gpus_busy(url, tuple(nodes), WINDOWS[window or "24 hours"])
    if isinstance(busy, str):
        st.warning(f"GPU metrics could not be read: {busy}")
        return
    if not busy:
        st.caption("Prometheus has no DCGM_FI_DEV_GPU_UTIL for DR's GPU nodes in that window.")
        return
    used = pd.DataFrame(busy, columns=["time", "GPUs"])
    used["time"] = pd.to_datetime(used["time"], unit="s", utc=True)
    used["series"] = "used (DCGM)"
    levels = pd.DataFrame(
        [{"series": "reserved", "GPUs": report["dr_gpus"]["reserved"]},
         {"series": "needed", "GPUs": report["recommendation"]["reserve_gpus"]}]
    )  # fmt: skip
    scale = alt.Scale(
        domain=["used (DCGM)", "reserved", "needed"], range=["#4c78a8", "#f58518", "#e45756"]
    )
    colour = alt.Color("series:N", scale=scale)
    line = (
        alt.Chart(used)
        .mark_line()
        .encode(x=alt.X("time:T", title="UTC"), y=alt.Y("GPUs:Q"), color=colour)
    )
    rules = alt.Chart(levels).mark_rule(strokeDash=[6, 4]).encode(y="GPUs:Q", color=colour)
    st.altair_chart(line + rules, width="stretch")
    st.caption("Used: the GPUs busy at DR (DCGM). Reserved and needed are as of now.")


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
    _over_time(report)


main()
