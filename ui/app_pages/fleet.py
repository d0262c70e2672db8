"""Fleet: every plan at a glance, problems first; one click opens its readiness or history."""

from __future__ import annotations

import datetime as dt
from urllib.parse import quote

import altair as alt
import pandas as pd  # type: ignore[import-untyped]
import streamlit as st

from drills.text import for_markdown
from ui import components, data
from ui.fleet import CALENDAR_DAYS, Blocked, FleetRow, Window, fleet_style
from ui.fleet_apps import ApplicationRow
from ui.settings import load_settings

KEY = "fleet"
ALL = "all"


def _frame(rows: list[FleetRow]) -> pd.DataFrame:
    now = components.now()

    def age(moment: dt.datetime | None) -> str:
        return components.ago(moment, now) if moment else "never"

    return pd.DataFrame(
        [
            {
                "plan": r.plan,
                "problems": ", ".join(r.problems) or "—",
                "serving": r.serving,
                "readiness": r.readiness,
                "DR can carry": r.dr_can_carry,
                "readiness checked": age(r.readiness_at),
                "last drill": age(r.last_drill_at),
                "verdict": r.last_verdict or "—",
                "RTO vs target": components.versus(r.last_rto, r.rto_target),
                "next drill": components.when(r.next_drill),
                "cadence limit in": _days(r.cadence_days_left),
                "open findings": r.open_findings,
                "forecast RTO": components.seconds(r.forecast_rto),
                "DR cost / month": r.dr_cost,
                "readiness link": f"/readiness?plan={quote(r.plan)}",
                "history link": f"/history?plan={quote(r.plan)}",
            }
            for r in rows
        ]
    )


def _days(left: float | None) -> str:
    """Time to the cadence limit, or how long past it."""
    if left is None:
        return "no success yet"
    written = components.seconds(abs(left) * 86400)
    return written if left >= 0 else f"overdue {written}"


def _filtered(rows: list[FleetRow]) -> list[FleetRow]:
    left, middle, right = st.columns([2, 1, 1])
    text = left.text_input("Plan name contains", key=f"{KEY}.name").strip().lower()
    serving = middle.selectbox(
        "Serving", [ALL, "primary", "dr", "in-transition"], key=f"{KEY}.serving"
    )
    only_problems = right.toggle("Only plans with problems", key=f"{KEY}.problems")
    return [
        r
        for r in rows
        if (not text or text in r.plan.lower())
        and (serving == ALL or r.serving == serving)
        and (not only_problems or r.problems)
    ]


def _calendar(windows: list[Window], blocked: list[Blocked]) -> None:
    st.subheader("Scheduled drills", divider="gray")
    if blocked:
        shown = "; ".join(
            f"{for_markdown(b.name)} ({b.plan}) {components.when(b.start)} → "
            f"{components.when(b.end)}"
            for b in blocked[:10]
        )
        st.caption(f"Blocked windows (drills and practices refused, scheduled ones skipped): "
                   f"{shown}")  # fmt: skip
    if not windows and not blocked:
        st.caption("No plan schedules a drill in the coming weeks (`schedule:` in the plan).")
        return
    clashes = [w for w in windows if w.overlaps]
    if clashes:
        lines = "\n".join(
            f"- **{w.plan}** at {components.when(w.start)} overlaps {', '.join(w.overlaps)}"
            for w in clashes[:10]
        )
        st.warning(
            f"**{len(clashes)} drill window(s) overlap on a shared cluster** — only one of "
            f"those plans can run at a time:\n{lines}"
        )
    frame = pd.DataFrame(
        [{"plan": w.plan, "start": w.start, "end": w.end,
          "kind": "overlaps" if w.overlaps else "drill",
          "overlap": "overlaps " + ", ".join(w.overlaps) if w.overlaps else "alone"}
         for w in windows]
        + [{"plan": b.plan, "start": b.start, "end": b.end, "kind": "blocked",
            "overlap": f"blocked: {b.name}"}
           for b in blocked],
        columns=["plan", "start", "end", "kind", "overlap"],
    )  # fmt: skip
    # The calendar's weeks on the axis, whatever the windows: a drill lasts minutes, so
    # each window is its bar and a tick at its start, seen at this scale too.
    now = dt.datetime.now(dt.UTC)
    weeks = [now.isoformat(), (now + dt.timedelta(days=CALENDAR_DAYS)).isoformat()]
    base = alt.Chart(frame).encode(
        x=alt.X(
            "start:T",
            title="UTC",
            scale=alt.Scale(domain=weeks),
            axis=alt.Axis(format="%Y-%m-%d %H:%M", labelAngle=-30),
        ),
        y=alt.Y("plan:N", title=None, sort=None),
        # A drill alone in blue, one that overlaps another in red, a blocked window in grey.
        color=alt.Color(
            "kind:N",
            scale=alt.Scale(
                domain=["drill", "overlaps", "blocked"], range=["#4c78a8", "#e45756", "#bab0ac"]
            ),
            legend=None,
        ),
        tooltip=["plan", "start:T", "end:T", "overlap"],
    )
    # A drill lasts minutes in a five-week span: each window is also a large mark at its
    # start with its date written above, and a plan's row is tall enough to read.
    chart = (
        base.mark_bar(height=20).encode(x2="end:T")
        + base.mark_point(shape="diamond", size=260, filled=True, opacity=1)
        + base.mark_text(dy=-18, fontSize=12).encode(text=alt.Text("start:T", format="%m-%d %H:%M"))
    )
    st.altair_chart(chart.properties(height=alt.Step(64)), width="stretch")


def _applications(rows: list[ApplicationRow]) -> None:
    """Each application's own last drill (`drills run --only`), beside its plan's."""
    if not rows:
        return
    st.subheader("Applications", divider="gray")
    st.caption("Each application's own last drill (`drills run PLAN --only APP`); the plan's "
               "row above counts every drill of the plan.")  # fmt: skip
    now = components.now()
    frame = pd.DataFrame(
        [{"plan": r.plan, "application": r.application, "workloads": r.workloads,
          "last drill": components.ago(r.last_drill_at, now) if r.last_drill_at else "never",
          "verdict": r.last_verdict or "—",
          "RTO vs target": components.versus(r.last_rto, r.rto_target),
          "run": r.run_id or "—"}
         for r in rows]
    )  # fmt: skip
    st.dataframe(frame, hide_index=True, width="stretch", key=f"{KEY}.applications")


def _table(rows: list[FleetRow]) -> None:
    # The plan and its problems stay in view however far the table is scrolled sideways.
    st.dataframe(
        fleet_style(_frame(rows)),
        hide_index=True,
        width="stretch",
        key=f"{KEY}.table",
        column_config={
            "plan": st.column_config.TextColumn("plan", pinned=True),
            "problems": st.column_config.TextColumn("problems", pinned=True, width="medium"),
            "readiness link": st.column_config.LinkColumn("open", display_text="readiness"),
            "history link": st.column_config.LinkColumn("", display_text="history"),
        },
    )
    chosen = st.selectbox("Open a plan", [r.plan for r in rows], key=f"{KEY}.open")
    left, right = st.columns(2)
    left.page_link("app_pages/readiness.py", label=f"Readiness of {chosen}",
                   query_params={"plan": chosen}, icon=":material/fact_check:")  # fmt: skip
    right.page_link("app_pages/history.py", label=f"History of {chosen}",
                    query_params={"plan": chosen}, icon=":material/monitoring:")  # fmt: skip


def main() -> None:
    settings = load_settings()
    st.title("Fleet")
    fleet = data.fleet(settings)
    if not fleet.rows:
        st.info("No plan is configured: set `DRILLS_PLANS` to plan files or globs.")
        return
    troubled = sum(1 for r in fleet.rows if r.problems)
    st.caption(f"{len(fleet.rows)} plan(s), {troubled} with problems — problems first.")
    rows = _filtered(fleet.rows)
    if not rows:
        # An empty table would read as a fleet without plans: say it is the filters.
        st.info("No plan matches these filters.")
    else:
        _table(rows)
    _applications(fleet.applications)
    _calendar(fleet.windows, fleet.blocked)


main()
