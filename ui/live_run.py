"""The Incident page's live view of the run it started or was opened on (an incident or a
failback): its state, current phase, clock, verdict and steps as they end, a Cancel while it
goes, and how it ended.

It keeps what it watches in the page's session state, under the page's key prefix.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import streamlit as st

from drills import timefmt
from drills.orchestrator import FlowRunProgress
from drills.store import Mode, RunStatus
from drills.text import for_markdown
from ui import components, data, launches
from ui.auth import Access
from ui.cancel import cancel_control
from ui.queries import RunRow
from ui.settings import UISettings

KEY = "declare"  # the Incident page's prefix, for its widgets and session state
RUN = f"{KEY}.flow_run"
T0 = f"{KEY}.declared_at"
PLAN = f"{KEY}.plan_name"
MODE = f"{KEY}.mode"  # what the watched run is: an incident or a failback
DONE = f"{KEY}.done"
WHO = f"{KEY}.who"  # who started the watched run: a cancel is theirs unless they sign in

STEP_ICON = {
    "ok": ":green[:material/check_circle:]",
    "failed": ":red[:material/cancel:]",
    "running": ":orange[:material/pending:]",
    "skipped": ":gray[:material/skip_next:]",
    "planned": ":gray[:material/edit_note:]",
}


def _current_phase(
    info: FlowRunProgress | None, row: RunRow | None, phases: list[dict[str, Any]]
) -> str:
    """The phase going on now, from the run's own timeline (each step is stored as it ends)."""
    if row is not None and row.status != RunStatus.RUNNING:
        return "done"
    going = [p["name"] for p in phases if not p.get("ended_at")]
    if going:
        return going[-1]
    if info and info.running_tasks:
        return ", ".join(info.running_tasks)
    if phases:
        return f"after {phases[-1]['name']}"
    return "starting" if info and info.state_type != "SCHEDULED" else "waiting for a worker"


def _clock(
    row: RunRow | None, start: dt.datetime | None, measured: float | None
) -> tuple[str, str | None]:
    """A clock as (value, state): running from ``start`` while the run goes; once it has
    ended, stopped at what the run measured, or at when it ended if it measured nothing."""
    if row is not None and row.status != RunStatus.RUNNING:
        if measured is not None:
            return components.seconds(measured), "measured"
        if start is not None and row.finished_at is not None:
            stopped = (row.finished_at - start).total_seconds()
            return components.seconds(stopped), f"stopped: run {row.status}"
        return "—", f"not measured: run {row.status}"
    if start is None:
        return "—", "not started"
    return components.seconds((components.now() - start).total_seconds()), "running"


def _clock_metric(column: Any, label: str, since: str, clock: tuple[str, str | None]) -> None:
    value, state = clock
    colour = "green" if state == "measured" else "gray" if state == "running" else "orange"
    column.metric(label, value, state, colour, help=f"Since {since}.", delta_arrow="off")


def _downtime(report: dict[str, Any] | None) -> float | None:
    """A failback's measured downtime, from its incident record."""
    record = (report or {}).get("incident") or {}
    value = record.get("failback_downtime_seconds")
    return float(value) if isinstance(value, int | float) else None


def _step_line(step: dict[str, Any], t0: dt.datetime | None) -> str:
    ended = step.get("ended_at")
    when = ""
    if ended and t0 is not None:
        since = (dt.datetime.fromisoformat(ended) - t0).total_seconds()
        when = f"{timefmt.offset(since)}, "
    took = components.seconds(step["seconds"]) if ended else "running"
    result = f": {step['result']}" if step.get("result") else ""
    if not ended and step.get("waiting"):  # a target not answering, retried to the deadline
        result = f": ↻ {step['waiting']}"
    return f"- {STEP_ICON.get(step['status'], '')} {step['name']} ({when}{took}){result}"


def _timeline(phases: list[dict[str, Any]], t0: dt.datetime | None) -> None:
    """Each phase with its steps, each step as soon as it ended, running ones marked."""
    for phase in phases:
        going = "" if phase.get("ended_at") else " (going on)"
        st.markdown(f"**{phase['name']}**{going} {STEP_ICON.get(phase['status'], '')}")
        lines = [_step_line(step, t0) for step in phase["steps"]]
        if lines:
            st.markdown("\n".join(lines))


def _outcome(info: FlowRunProgress | None, row: RunRow | None, mode: str) -> bool:
    """How the run ended, once it has; True then."""
    # An incident stopped part-way ends its flow run but stays unfinished in the history.
    finished = bool(info and info.final and (row is None or row.status != RunStatus.RUNNING))
    if finished and row is not None:
        if row.status == RunStatus.SUCCEEDED and mode == Mode.FAILBACK:
            st.success(
                f"The failback finished: {row.status}. The primary is serving; the incident "
                "is closed."
            )
        elif row.status == RunStatus.SUCCEEDED:
            st.success(f"The takeover finished: {row.status}. DR is serving.")
        else:
            why = for_markdown(row.error or "see the report")
            st.error(f"The {mode} run ended {row.status}: {why}")
        st.page_link(
            "app_pages/history.py",
            label="See this run in the drill history",
            icon=":material/monitoring:",
            query_params={"run": row.id},
        )
    elif finished and info is not None:
        st.error(f"The flow run ended {info.state_name} without a history record.")
    return finished


def _live(settings: UISettings, access: Access, flow_run_id: str) -> bool:
    """The run as it stands; True once it is over (Prefect final, history finished)."""
    info = launches.flow_run(settings, flow_run_id)
    plan_name = st.session_state.get(PLAN) or ""
    declared_at: dt.datetime | None = st.session_state.get(T0)
    mode = st.session_state.get(MODE) or _mode_of(info)
    row = data.live_run(settings, flow_run_id, plan_name, declared_at, mode)
    link = settings.flow_run_url(flow_run_id)
    st.subheader(f"{mode.capitalize()} run {info.name if info else flow_run_id}")
    if link:
        st.link_button("Open this run in the Prefect UI", link)
    report = data.live_report(settings, row.id) if row else None
    phases: list[dict[str, Any]] = (report or {}).get("phases") or []
    cols = st.columns(4)
    cols[0].metric("State", info.state_name if info else "unknown")
    cols[1].metric("Current phase", _current_phase(info, row, phases))
    if mode == Mode.FAILBACK:
        # A failback's T0 is the DR writers' stop, not the click: no clock before it.
        clock = _clock(row, row.t0 if row else None, _downtime(report))
        _clock_metric(cols[2], "Downtime", "the DR writers stopped", clock)
    else:
        t0 = (row.t0 if row else None) or declared_at
        clock = _clock(row, t0, row.rto_seconds if row else None)
        _clock_metric(cols[2], "RTO clock", "T0, the declaration", clock)
    cols[3].metric("Verdict", components.verdict_label(row.verdict) if row else "—")
    if info is not None and not info.final:
        cancel_control(
            settings, access, info, flow_run_id=flow_run_id, plan_name=plan_name,
            mode=mode, run_id=row.id if row else None, key=KEY,
            name=st.session_state.get(WHO) or st.session_state.get(f"{KEY}.operator"),
        )  # fmt: skip
    components.detection_line(report)
    _timeline(phases, (row.t0 if row else None) or declared_at)
    components.gates_table(report)
    return _outcome(info, row, mode)


def _mode_of(info: FlowRunProgress | None) -> str:
    """The watched run's mode from its flow run (a page opened on ?flow_run=…)."""
    mode = info.parameters.get("mode") if info else None
    return Mode.FAILBACK if mode == Mode.FAILBACK else Mode.INCIDENT


def _watch(settings: UISettings, access: Access, flow_run_id: str, done: bool) -> None:
    if _live(settings, access, flow_run_id) and not done:
        st.session_state[DONE] = flow_run_id
        data.clear_caches()  # where the plan serves from changed: the banner reads it again
        st.rerun(scope="app")  # once more as a whole page, without the timer


def watch_section(settings: UISettings, access: Access) -> None:
    flow_run_id = st.session_state.get(RUN) or st.query_params.get("flow_run")
    if not flow_run_id:
        return
    done = st.session_state.get(DONE) == flow_run_id
    with st.container(border=True):
        # One fragment in both renders, live (every 2 s) and over: the same identity, so the
        # whole-page render at the run's end replaces its elements in place. A plain render
        # there drew the outcome and its history link a second time beside the fragment's.
        st.fragment(_watch, run_every=None if done else 2)(settings, access, flow_run_id, done)


def follow(flow_run_id: str, plan_name: str, mode: str, at: dt.datetime, who: str) -> None:
    """Watch this run from now on, and keep it in the address for a reload; who started
    it is kept too (the form that named them is off while it runs, and forgets)."""
    st.session_state[WHO] = who
    st.session_state[RUN] = flow_run_id
    st.session_state[T0] = at
    st.session_state[PLAN] = plan_name
    st.session_state[MODE] = mode
    st.query_params["flow_run"] = flow_run_id
