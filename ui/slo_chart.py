"""A run's SLOs after the switch: each SLO's values on the run's clock (seconds since T0),
its threshold drawn across, and the RTO target by which it had to be OK."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd  # type: ignore[import-untyped]

from ui.charts import CheckedLayerChart

STATUS_COLOURS = {"held": "#2e7d32", "breached": "#c62828", "unverified": "#ef6c00",
                  "stopped": "#757575"}  # fmt: skip


def slo_frames(slos: list[dict[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(each value read, one row per SLO with its threshold), labelled "name (status)"."""
    values, rules = [], []
    for slo in slos:
        label = f"{slo['name']} ({slo.get('status', '?')})"
        for t, value in slo.get("values") or []:
            values.append({"slo": label, "seconds": float(t), "value": float(value)})
        rules.append({"slo": label, "threshold": float(slo["threshold"]), "op": slo["op"]})
    return pd.DataFrame(values, columns=["slo", "seconds", "value"]), pd.DataFrame(rules)


def slo_chart(slos: list[dict[str, Any]], rto_target_s: float | None) -> CheckedLayerChart:
    """One panel per SLO would hide how they moved together; one chart, one colour each,
    its threshold as a dashed rule in the same colour."""
    values, rules = slo_frames(slos)
    colour = alt.Color("slo:N", title="SLO (outcome)", legend=alt.Legend(orient="bottom"))
    lines = (
        alt.Chart(values)
        .mark_line(point=True)
        .encode(
            x=alt.X("seconds:Q", title="seconds since T0 (DNS answered DR)"),
            y=alt.Y("value:Q", title="value"),
            color=colour,
            tooltip=["slo", alt.Tooltip("seconds:Q", format=".1f"), "value"],
        )
    )
    thresholds = (
        alt.Chart(rules)
        .mark_rule(strokeDash=[6, 4])
        .encode(y="threshold:Q", color=colour, tooltip=["slo", "op", "threshold"])
    )
    layers: list[alt.Chart] = [lines, thresholds]
    if rto_target_s is not None:
        target = pd.DataFrame([{"seconds": rto_target_s, "what": "OK by: the RTO target"}])
        layers.append(
            alt.Chart(target)
            .mark_rule(color="#616161", strokeDash=[2, 2])
            .encode(x="seconds:Q", tooltip=["what"])
        )
    return CheckedLayerChart(layer=layers).properties(height=320)
