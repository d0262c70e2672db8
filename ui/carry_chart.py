"""The part of the primary's demand DR carried over a run: for each measured service, the
percentage its ready replicas carry on the run's clock (seconds since T0), stepping as
replicas became ready, and its target_percent drawn across."""

from __future__ import annotations

import datetime as dt
from typing import Any

import altair as alt
import pandas as pd  # type: ignore[import-untyped]

from ui.charts import CheckedLayerChart


def carry_frames(capacity: dict[str, Any], t0: dt.datetime) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(each change of what a service carried, one row per service with its target)."""
    points, targets = [], []
    for row in capacity.get("services") or []:
        label = f"{row['service']} ({'carried' if row.get('carried') else 'short'})"
        for at, ready, percent in row.get("over_time") or []:
            if percent is None:  # demand unknown: nothing to draw against
                continue
            points.append({"service": label, "seconds": at - t0.timestamp(),
                           "percent": percent, "replicas": ready})  # fmt: skip
        targets.append({"service": label, "target": float(row["target_percent"])})
    columns = ["service", "seconds", "percent", "replicas"]
    return pd.DataFrame(points, columns=columns), pd.DataFrame(targets)


def carry_chart(capacity: dict[str, Any], t0: dt.datetime) -> CheckedLayerChart:
    points, targets = carry_frames(capacity, t0)
    colour = alt.Color("service:N", title="service (outcome)", legend=alt.Legend(orient="bottom"))
    lines = (
        alt.Chart(points)
        .mark_line(point=True, interpolate="step-after")
        .encode(
            x=alt.X("seconds:Q", title="seconds since T0"),
            y=alt.Y("percent:Q", title="% of the primary's demand at T0 carried"),
            color=colour,
            tooltip=["service", alt.Tooltip("seconds:Q", format=".1f"), "percent", "replicas"],
        )
    )
    rules = (
        alt.Chart(targets)
        .mark_rule(strokeDash=[6, 4])
        .encode(y="target:Q", color=colour, tooltip=["service", "target"])
    )
    return CheckedLayerChart(layer=[lines, rules]).properties(height=260)
