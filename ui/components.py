"""Pieces more than one page draws: badges, durations, a readiness checklist, and the
banner every page shows while a plan serves from DR."""

from __future__ import annotations

import datetime as dt
from typing import Any

import streamlit as st

from drills import timefmt
from drills.checks import CheckResult, ReadinessReport, Status, by_category, verdict, worst
from drills.text import for_markdown
from ui import data
from ui.settings import UISettings

# Material icons come with Streamlit's own font, so they render even where the system
# has no emoji font (servers, CI's Chromium). Table cells and metrics cannot show
# icons, and such fonts may lack even ✓: they say it in words.
STATUS_BADGE = {
    Status.PASS: ":green-badge[:material/check_circle: pass]",
    Status.WARN: ":orange-badge[:material/warning: warn]",
    Status.FAIL: ":red-badge[:material/cancel: fail]",
    Status.ERROR: ":violet-badge[:material/error: error]",
}
OVERALL_ICON = {
    "ready": ":green[:material/check_circle:]",
    "warn": ":orange[:material/warning:]",
    "blocked": ":red[:material/block:]",
    "unknown": ":gray[:material/help:]",
}


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def seconds(value: float | None) -> str:
    """A duration, written as every view writes one (:func:`drills.timefmt.duration`)."""
    return timefmt.duration(value)


def versus(value: float | None, target: float | None) -> str:
    """``"42 s / 15 min"``, or ``"16 min / 15 min OVER"``: a measure against its objective."""
    if value is None:
        return timefmt.NONE
    if target is None:
        return seconds(value)
    over = "" if value <= target else " OVER"
    return f"{seconds(value)} / {seconds(target)}{over}"


def ago(then: dt.datetime, at: dt.datetime | None = None) -> str:
    """``"4 min ago"``: how old a result is, in words a person reads at a glance."""
    return timefmt.ago(then, at or now())


def when(value: dt.datetime | str | None) -> str:
    """A moment as people read it, 24-hour, with its zone; ISO text is accepted."""
    return timefmt.moment(value)


def verdict_label(value: str | None) -> str:
    return value or "—"


def overall(report: ReadinessReport | None) -> tuple[str, str]:
    """The plan's overall readiness as (icon, words)."""
    if report is None:
        return OVERALL_ICON["unknown"], "not checked yet"
    words = verdict(report)
    if words == "ready":
        return OVERALL_ICON["ready"], words
    return OVERALL_ICON["blocked" if report.blocking else "warn"], words


def _evidence(result: CheckResult) -> None:
    if result.remediation and result.status is not Status.PASS:
        st.info(f"**What to do:** {for_markdown(result.remediation)}")
    if result.evidence:
        st.json(dict(result.evidence), expanded=1)
    else:
        st.caption("No evidence recorded.")
    st.caption(f"`{result.id}` ran in {seconds(result.duration_s)}")


def check_line(result: CheckResult, checked: str) -> None:
    """One row per check: badge, title, summary and age; evidence and remediation inside."""
    blocking = " :red-badge[BLOCKING · critical tier]" if result.blocking else ""
    summary = for_markdown(result.summary)
    label = (
        f"{STATUS_BADGE[result.status]}{blocking} **{result.title}** — {summary}"
        f" :gray[· checked {checked}]"
    )
    with st.expander(label):
        _evidence(result)


def readiness_checklist(
    report: ReadinessReport, *, at: dt.datetime | None = None, after_blocking: str = ""
) -> None:
    """The overall status, the blocking failures on top, then every check by category.
    `after_blocking` is a caption under the blocking failures (the forecast, on a plan they
    block: never above them)."""
    icon, words = overall(report)
    checked = ago(report.checked_at, at)
    counts = {s: sum(1 for r in report.results if r.status is s) for s in Status}
    summary = ", ".join(f"{n} {s.value}" for s, n in counts.items() if n)
    headline = f"{icon} **{words}** — {len(report.results)} checks ({summary}), checked {checked}"
    if words == "ready":
        st.success(headline)
    elif report.blocking:
        st.error(headline)
    else:
        st.warning(headline)
    if report.blocking:
        lines = "\n".join(f"- **{r.title}**: {for_markdown(r.summary)}" for r in report.blocking)
        st.error(
            f"**Blocking failures — a drill would stop here:**\n{lines}", icon=":material/block:"
        )
        if after_blocking:
            st.caption(after_blocking)
    for category, results in by_category(report):
        status = worst(r.status for r in results)
        st.subheader(f"{category} {STATUS_BADGE[status]}", divider="gray")
        for result in results:
            check_line(result, checked)


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """A small Markdown table, for summaries too short to deserve a dataframe."""
    if not rows:
        return ""
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [for_markdown(str(row[h])).replace("\n", "<br>") for h in head]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


MAX_TABS = 8  # more plans than this: one plan at a time, chosen in a selector


def plan_picker(key: str, names: list[str]) -> str:
    """One plan of many, chosen in a selector that starts at (and keeps in the address)
    the plan of ``?plan=``: a page per plan of a fleet reads only the plan shown."""
    names = sorted(names)
    wanted = st.query_params.get("plan")
    chosen = st.selectbox(
        f"Plan ({len(names)})", names, index=names.index(wanted) if wanted in names else 0, key=key
    )
    if chosen != wanted:
        st.query_params["plan"] = chosen
    return str(chosen)


INCIDENT_PAGE = "app_pages/declare.py"


def serving_banner(settings: UISettings) -> None:
    """While a plan serves from DR: since when, and which incident, on every page.

    From the history alone (data.serving_from_dr, cached briefly): no DNS read or probe
    on every rerun; `drills status` confirms it live.
    """
    for plan, recorded in data.serving_from_dr(settings.db_url):
        since = f"since {when(recorded.since)} ({ago(recorded.since)})" if recorded.since else ""
        st.error(
            f"**{for_markdown(plan)} serves from DR** {since} — incident "
            f"`{recorded.incident_id}`, declared {when(recorded.incident_t0)}. "
            "Production stays at DR until someone fails it back.",
            icon=":material/emergency_home:",
        )
    if data.serving_from_dr(settings.db_url):
        st.page_link(
            INCIDENT_PAGE, label="The incident: the way back and Fail back",
            icon=":material/home_health:",
        )  # fmt: skip


def detection_line(report: dict[str, Any] | None) -> None:
    """An incident's detection → declaration, when its detection is known."""
    detection = (report or {}).get("detection")
    if not detection:
        return
    source = "the alert's startsAt" if detection.get("source") == "alert" else "given by hand"
    st.markdown(
        f"Detected **{when(detection['detected_at'])}** ({source}); declared "
        f"{seconds(detection.get('detection_seconds'))} later."
    )


def gates_table(report: dict[str, Any] | None) -> None:
    """The plan's gates as they stood when the run started: an incident is never stopped
    by them, and says what they were."""
    gates = (report or {}).get("gates") or []
    if not gates:
        return
    st.markdown("**Gates at the start** (an incident goes on whatever they say)")
    st.dataframe(
        [{"gate": f"{g['kind']} {g['name']}", "state": g["state"], "detail": g["detail"]}
         for g in gates],
        hide_index=True,
    )  # fmt: skip
