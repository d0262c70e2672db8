"""Altair charts: the RTO trend across drills, and a run's phases as a Gantt chart."""

from __future__ import annotations

import datetime as dt
from typing import Any

import altair as alt
import pandas as pd  # type: ignore[import-untyped]

from drills.store import Verdict
from drills.timefmt import duration
from ui.queries import RtoPoint

OUTCOME_COLOURS = {
    Verdict.MET: "#2e7d32",
    Verdict.MISSED: "#ef6c00",
    Verdict.NOT_MET: "#ad1457",
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


# What each point is, in the one shape legend: a measured RTO, a run that ended before it
# measured one (drawn on the axis), and what the preflight forecast.
MEASURED, UNMEASURED, FORECAST = "RTO measured", "no RTO: ended first", "forecast"
SHAPES = {MEASURED: "circle", UNMEASURED: "cross", FORECAST: "diamond"}
TARGET, FULL = "RTO target", "full capacity"
LINES = {TARGET: [6, 4], FULL: [2, 3]}
# A target this many times the highest value plotted would flatten the runs onto the
# baseline: it is written above the chart instead of drawn.
FAR_ABOVE = 3.0


def takeovers(points: list[RtoPoint]) -> list[RtoPoint]:
    """The runs with an RTO to plot: a failback's measure is its downtime, not an RTO."""
    return [p for p in points if p.mode != "failback"]


def rto_frame(points: list[RtoPoint]) -> pd.DataFrame:
    rows = [
        {
            "run": p.id,
            "plan": p.plan,
            "started": p.started_at.astimezone(dt.UTC).replace(tzinfo=None),
            # A run that failed before it could measure sits on the axis, marked.
            "rto_s": p.rto_seconds if p.rto_seconds is not None else 0.0,
            "measured": p.rto_seconds is not None,
            "point": MEASURED if p.rto_seconds is not None else UNMEASURED,
            "target_s": p.rto_target,
            "full_s": p.full_capacity_seconds,
            "outcome": _outcome(p),
            "failed": p.failed,
            "forecast_s": p.forecast_seconds,
        }
        for p in takeovers(points)
    ]
    columns = ["run", "plan", "started", "rto_s", "measured", "point", "target_s", "full_s",
               "outcome", "failed", "forecast_s"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def _time_axis(frame: pd.DataFrame) -> alt.X:
    """24-hour UTC ticks, on a span never narrower than four minutes: one run alone would
    otherwise get an axis of milliseconds (".757"), and runs seconds apart a single
    vertical line on an axis of an hour."""
    if frame.empty:
        return alt.X("started:T", title="run started (UTC)")
    low, high = frame["started"].min(), frame["started"].max()
    pad = max((high - low) * 0.1, pd.Timedelta(minutes=2))
    domain = [(low - pad).isoformat(), (high + pad).isoformat()]
    return alt.X(
        "started:T",
        title="run started (UTC)",
        scale=alt.Scale(domain=domain),
        axis=alt.Axis(format="%Y-%m-%d %H:%M", labelAngle=0, labelOverlap="greedy"),
    )


def _highest(frame: pd.DataFrame) -> float:
    values = [frame[c].max() for c in ("rto_s", "full_s", "forecast_s") if frame[c].notna().any()]
    return float(max(values, default=0.0))


def _forecast_marks(base: alt.Chart, shapes: alt.Scale) -> alt.Chart:
    """What the preflight forecast for each run, as hollow diamonds beside its measured RTO."""
    return (
        base.transform_filter(alt.datum.forecast_s != None)  # noqa: E711 - a Vega expression
        .transform_calculate(point=f"'{FORECAST}'")
        .mark_point(size=80, color="#1565c0", filled=False)
        .encode(
            y="forecast_s:Q",
            shape=alt.Shape("point:N", title="point", scale=shapes),
            tooltip=[
                alt.Tooltip("run:N"),
                alt.Tooltip("forecast_s:Q", title="forecast RTO (s)", format=".3~g"),
                alt.Tooltip("rto_s:Q", title="measured RTO (s)", format=".3~g"),
            ],
        )
    )


def _present(scale: dict[str, Any], shown: set[str]) -> alt.Scale:
    """A legend of the entries the chart draws, in their fixed order: an entry for a mark
    that is not there (a target written above the chart, say) would explain nothing, and
    widened the legend past the chart's edge."""
    kept = [name for name in scale if name in shown]
    return alt.Scale(domain=kept, range=[scale[name] for name in kept])


def _line(
    base: alt.Chart, field: str, name: str, colour: str, dashes: alt.Scale, **mark: Any
) -> alt.Chart:
    return (
        base.transform_filter(f"datum.{field} != null")
        .transform_calculate(line=f"'{name}'")
        .mark_line(color=colour, **mark)
        .encode(
            y=f"{field}:Q",
            strokeDash=alt.StrokeDash("line:N", title="line", scale=dashes),
        )
    )  # fmt: skip


def target_note(points: list[RtoPoint]) -> str | None:
    """Where the target is too far above the runs to draw: what the chart says instead."""
    frame = rto_frame(points)
    targets = frame["target_s"].dropna()
    highest = _highest(frame)
    if targets.empty or highest <= 0 or targets.min() <= FAR_ABOVE * highest:
        return None
    return (
        f"RTO target {duration(float(targets.min()))} is far above every run plotted "
        f"(the highest {duration(highest)}): not drawn, so the runs keep their scale."
    )


def rto_trend(points: list[RtoPoint]) -> CheckedLayerChart:
    """RTO per run over time (failbacks left out: their measure is a downtime); the target
    as a dashed line unless far above the runs; runs that ended before measuring as
    crosses on the axis; full capacity as a dotted line; forecasts as diamonds."""
    frame = rto_frame(points)
    # The data goes on the layer chart, once: given to each layer, Altair would hash it
    # (through the frame's repr) to merge them, which costs more than drawing.
    base = CheckedChart().encode(x=_time_axis(frame))
    tooltip = [
        alt.Tooltip("run:N"),
        alt.Tooltip("plan:N"),
        alt.Tooltip("started:T", title="started (UTC)", format="%Y-%m-%d %H:%M"),
        alt.Tooltip("rto_s:Q", title="RTO (s)", format=".3~g"),
        alt.Tooltip("full_s:Q", title="full capacity (s)", format=".3~g"),
        alt.Tooltip("target_s:Q", title="target (s)", format=".3~g"),
        alt.Tooltip("outcome:N"),
    ]
    colour = alt.Color(
        "outcome:N", title="verdict", scale=_present(dict(OUTCOME_COLOURS), set(frame["outcome"]))
    )
    target_drawn = target_note(points) is None and frame["target_s"].notna().any()
    drawn = {TARGET} if target_drawn else set()
    drawn |= {FULL} if frame["full_s"].notna().any() else set()
    dashes = _present(LINES, drawn)
    marked = set(frame["point"]) | ({FORECAST} if frame["forecast_s"].notna().any() else set())
    shapes = _present(SHAPES, marked)
    measured = base.transform_filter(alt.datum.measured)
    line = measured.mark_line(color="#90a4ae").encode(y=alt.Y("rto_s:Q", title="RTO (seconds)"))
    dots = base.mark_point(filled=True, size=70).encode(
        y="rto_s:Q",
        color=colour,
        shape=alt.Shape("point:N", title="point", scale=shapes),
        tooltip=tooltip,
    )
    layers = [line]
    if target_drawn:
        layers.append(_line(base, "target_s", TARGET, "#c62828", dashes, interpolate="step-after"))
    if FULL in drawn:
        layers.append(_line(base, "full_s", FULL, "#607d8b", dashes))
    layers += [dots, _forecast_marks(base, shapes)]
    # Legends below the plot: beside it, the last entries fell off the chart's height.
    # Tall enough that the plot keeps most of it once the axis and the legends are drawn.
    chart = CheckedLayerChart(data=frame, layer=layers).properties(height=400)
    return chart.configure_legend(orient="bottom", direction="vertical")


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
