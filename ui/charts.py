"""Altair charts: the RTO trend across drills, and a run's phases as a Gantt chart."""

from __future__ import annotations

import datetime as dt
from typing import Any

import altair as alt
import pandas as pd  # type: ignore[import-untyped]

from drills.store.kinds import Verdict
from ui.queries import RtoPoint

OUTCOME_COLOURS = {
    Verdict.MET: "#2e7d32",
    Verdict.MISSED: "#ef6c00",
    Verdict.FAILED: "#c62828",
    Verdict.ABORTED: "#6a1b9a",
    "other": "#757575",
}
PHASE_COLOURS = {"ok": "#2e7d32", "failed": "#c62828", "running": "#f9a825", "skipped": "#9e9e9e"}


class _Checked:
    """Skips Altair's JSON-schema validation when Streamlit serializes the chart.

    It costs more than the rest of the history page together (~0.1 s a chart), and
    these specs are fixed in code: tests/ui/test_charts.py validates them instead.
    """

    def to_dict(self, validate: bool = False, **kwargs: Any) -> dict[str, Any]:
        return super().to_dict(validate=validate, **kwargs)  # type: ignore[misc]


class CheckedChart(_Checked, alt.Chart):
    pass


class CheckedLayerChart(_Checked, alt.LayerChart):
    pass


def _outcome(point: RtoPoint) -> str:
    return point.verdict if point.verdict in OUTCOME_COLOURS else "other"


def rto_frame(points: list[RtoPoint]) -> pd.DataFrame:
    rows = [
        {
            "run": p.id,
            "plan": p.plan,
            "started": p.started_at.astimezone(dt.UTC).replace(tzinfo=None),
            # A run that failed before it could measure sits on the axis, marked.
            "rto_s": p.rto_seconds if p.rto_seconds is not None else 0.0,
            "measured": p.rto_seconds is not None,
            "target_s": p.rto_target,
            "full_s": p.full_capacity_seconds,
            "outcome": _outcome(p),
            "failed": p.failed,
            "forecast_s": p.forecast_seconds,
        }
        for p in points
    ]
    columns = ["run", "plan", "started", "rto_s", "measured", "target_s", "full_s", "outcome",
               "failed", "forecast_s"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def _forecast_marks(base: alt.Chart) -> alt.Chart:
    """What the preflight forecast for each run, as hollow diamonds beside its measured RTO."""
    return (
        base.transform_filter(alt.datum.forecast_s != None)  # noqa: E711 - a Vega expression
        .mark_point(shape="diamond", size=80, color="#1565c0", filled=False)
        .encode(
            y="forecast_s:Q",
            tooltip=[
                alt.Tooltip("run:N"),
                alt.Tooltip("forecast_s:Q", title="forecast RTO (s)", format=".3~g"),
                alt.Tooltip("rto_s:Q", title="measured RTO (s)", format=".3~g"),
            ],
        )
    )


def rto_trend(points: list[RtoPoint]) -> CheckedLayerChart:
    """RTO per run over time; the target as a dashed line; failed runs as red crosses;
    full capacity (the normal tier ready, after the RTO) as a dotted grey line."""
    frame = rto_frame(points)
    # The data goes on the layer chart, once: given to each layer, Altair would hash it
    # (through the frame's repr) to merge them, which costs more than drawing.
    base = CheckedChart().encode(x=alt.X("started:T", title="run started (UTC)"))
    tooltip = [
        alt.Tooltip("run:N"),
        alt.Tooltip("plan:N"),
        alt.Tooltip("started:T", format="%Y-%m-%d %H:%M"),
        alt.Tooltip("rto_s:Q", title="RTO (s)", format=".3~g"),
        alt.Tooltip("full_s:Q", title="full capacity (s)", format=".3~g"),
        alt.Tooltip("target_s:Q", title="target (s)"),
        alt.Tooltip("outcome:N"),
    ]
    colour = alt.Color(
        "outcome:N",
        title="verdict",
        scale=alt.Scale(domain=list(OUTCOME_COLOURS), range=list(OUTCOME_COLOURS.values())),
    )
    measured = base.transform_filter(alt.datum.measured)
    line = measured.mark_line(color="#90a4ae").encode(y=alt.Y("rto_s:Q", title="RTO (seconds)"))
    dots = base.mark_point(filled=True, size=70).encode(
        y="rto_s:Q",
        color=colour,
        shape=alt.Shape(
            "failed:N",
            title="failed",
            scale=alt.Scale(domain=[False, True], range=["circle", "cross"]),
        ),
        tooltip=tooltip,
    )
    target = (
        base.transform_filter(alt.datum.target_s != None)  # noqa: E711 - a Vega expression
        .mark_line(strokeDash=[6, 4], color="#c62828", interpolate="step-after")
        .encode(y="target_s:Q")
    )
    full = (
        base.transform_filter(alt.datum.full_s != None)  # noqa: E711 - a Vega expression
        .mark_line(strokeDash=[2, 3], color="#607d8b")
        .encode(y="full_s:Q")
    )
    layers = [line, target, full, dots, _forecast_marks(base)]
    return CheckedLayerChart(data=frame, layer=layers).properties(height=300)


def gantt_frame(phases: list[dict[str, Any]]) -> pd.DataFrame:
    if not phases:
        return pd.DataFrame(
            columns=["phase", "start_s", "end_s", "seconds", "status", "order", "steps"]
        )
    origin = dt.datetime.fromisoformat(phases[0]["started_at"])
    rows = []
    for order, phase in enumerate(phases):
        start = dt.datetime.fromisoformat(phase["started_at"])
        end = dt.datetime.fromisoformat(phase["ended_at"]) if phase.get("ended_at") else None
        start_s = (start - origin).total_seconds()
        seconds = float(phase.get("seconds") or 0.0)
        end_s = (end - origin).total_seconds() if end else start_s + seconds
        rows.append(
            {
                "phase": phase["name"],
                "start_s": start_s,
                # A phase of a few milliseconds still gets a visible sliver.
                "end_s": max(end_s, start_s + 0.05),
                "seconds": seconds,
                "status": phase.get("status", "ok"),
                "order": order,
                "steps": len(phase.get("steps") or []),
            }
        )
    return pd.DataFrame(rows)


def gantt(phases: list[dict[str, Any]]) -> CheckedChart:
    """The phases on a common clock (seconds since the run started)."""
    frame = gantt_frame(phases)
    statuses = list(PHASE_COLOURS)
    return (
        CheckedChart(frame)
        .mark_bar(cornerRadius=2)
        .encode(
            x=alt.X("start_s:Q", title="seconds since the run started"),
            x2="end_s:Q",
            y=alt.Y(
                "phase:N",
                sort=alt.EncodingSortField("order"),
                title=None,
                axis=alt.Axis(labelOverlap=False, labelLimit=200),
            ),
            color=alt.Color(
                "status:N",
                scale=alt.Scale(domain=statuses, range=[PHASE_COLOURS[s] for s in statuses]),
            ),
            tooltip=[
                alt.Tooltip("phase:N"),
                alt.Tooltip("status:N"),
                alt.Tooltip("seconds:Q", format=".3~g"),
                alt.Tooltip("steps:Q"),
            ],
        )
        .properties(height=max(120, 36 * len(frame)))
    )
