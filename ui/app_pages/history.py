"""Drill history: every run, the RTO trend, and one run in detail."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import streamlit as st

from drills.store import Mode, RunStatus, Verdict
from drills.text import for_markdown
from ui import auth, charts, components, data, guard, launches
from ui.cancel import cancel_control
from ui.carry_chart import carry_chart
from ui.queries import RunRow
from ui.settings import UISettings, load_settings
from ui.slo_chart import slo_chart

KEY = "history"
ALL = "All"
MODES = (ALL, Mode.DRILL, Mode.PRACTICE, Mode.INCIDENT, Mode.FAILBACK)
VERDICTS = (ALL, Verdict.MET, Verdict.MISSED, Verdict.NOT_MET, Verdict.FAILED, Verdict.ABORTED)


def _table(rows: list[RunRow]) -> list[dict[str, Any]]:
    return [
        {
            "date": components.when(r.started_at),
            "plan": r.plan,
            "mode": r.mode + (" (dry run)" if r.dry_run else ""),
            "operator": r.operator,
            "verdict": components.verdict_label(r.verdict) if r.verdict else r.status,
            "RTO / target": components.versus(r.rto_seconds, r.rto_target),
            "client RTO": components.seconds(r.client_rto_seconds),
            "full capacity": components.seconds(r.full_capacity_seconds),
            "RPO / target": components.versus(r.rpo_worst, r.rpo_target),
            "duration": components.seconds(r.duration_seconds),
            "run": r.id,
        }
        for r in rows
    ]


def _filters(settings: UISettings) -> tuple[str | None, str | None, str | None]:
    known = {e.name for e in data.plans(settings) if e.valid}
    names = sorted(known | set(data.plans_in_history(settings.db_url)))
    wanted = st.query_params.get("plan")  # the Fleet page's link, followed once
    if wanted in names and st.session_state.get(f"{KEY}.linked") != wanted:
        st.session_state[f"{KEY}.plan"] = st.session_state[f"{KEY}.linked"] = wanted
    left, middle, right = st.columns(3)
    plan = left.selectbox("Plan", [ALL, *names], key=f"{KEY}.plan")
    mode = middle.selectbox("Mode", MODES, key=f"{KEY}.mode")
    verdict = right.selectbox("Verdict", VERDICTS, key=f"{KEY}.verdict")
    chosen = tuple(None if v == ALL else v for v in (plan, mode, verdict))
    # A new filter starts again from the first page.
    if st.session_state.get(f"{KEY}.filters") != chosen:
        st.session_state[f"{KEY}.filters"] = chosen
        st.session_state[f"{KEY}.page"] = 0
    return chosen[0], chosen[1], chosen[2]


def _pager(page: int, more: bool) -> None:
    prev_col, label_col, next_col = st.columns([1, 2, 1])
    if prev_col.button("← Newer", key=f"{KEY}.newer", disabled=page == 0):
        st.session_state[f"{KEY}.page"] = page - 1
        st.rerun()
    label_col.caption(f"Page {page + 1}, {data.PAGE_SIZE} runs a page, newest first")
    if next_col.button("Older →", key=f"{KEY}.older", disabled=not more):
        st.session_state[f"{KEY}.page"] = page + 1
        st.rerun()


def _still_running(settings: UISettings, run: dict[str, Any]) -> None:
    if not run["flow_run_id"]:
        st.caption(
            "Started from a terminal (`drills run`): Ctrl-C there cancels it. If that "
            f"process is gone, `drills recover {run['id']}` puts things back in order."
        )
        return
    usable = launches.prefect_state(settings).usable
    info = launches.flow_run(settings, run["flow_run_id"]) if usable else None
    cancel_control(
        settings, auth.current_access(settings), info, flow_run_id=run["flow_run_id"],
        plan_name=run["plan"], mode=run["mode"], run_id=run["id"], key=f"{KEY}.{run['id']}",
    )  # fmt: skip


def _detail(settings: UISettings, run_id: str) -> None:
    report = data.run_report(settings.db_url, run_id)
    if report is None:
        st.warning(f"No run {run_id} in the history store.")
        return
    run = report["run"]
    st.subheader(f"Run `{run['id']}` — {run['plan']}, {run['mode']}")
    _verdict_and_objectives(report)
    _who_and_when(run)
    _incident_record(report.get("incident"), run["id"])
    if run["status"] == RunStatus.RUNNING and not run["finished_at"]:
        _still_running(settings, run)
    _what_went_wrong(report)
    _downloads(report)
    _evidence_pack(settings, run)
    _demand_carried(report)
    _slos_after_the_switch(report)
    timeline, steps, journal, readiness = st.tabs(
        ["Phase timeline", "Steps and evidence", "Journal of changes", "Readiness at T0"]
    )
    with timeline:
        _timeline(report["phases"])
    with steps:
        _steps_and_evidence(report["phases"] or [])
    with journal:
        _journal(report["journal"])
    with readiness:
        _readiness_at_t0(report)


def _verdict_and_objectives(report: dict[str, Any]) -> None:
    run = report["run"]
    m = report.get("measurement") or {}
    cols = st.columns(5)
    cols[0].metric("Verdict", components.verdict_label(run["verdict"]), run["status"], "off")
    if run["mode"] == Mode.FAILBACK:  # its measure is the downtime, and it has no RTO target
        downtime = (report.get("incident") or {}).get("failback_downtime_seconds")
        cols[1].metric("Downtime", components.seconds(downtime), "from the DR writers' stop",
                       "off", delta_arrow="off")  # fmt: skip
    else:
        cols[1].metric(
            "RTO", components.seconds(report["rto_seconds"]),
            f"target {components.seconds(m.get('rto_target_seconds'))}", "off", delta_arrow="off",
        )  # fmt: skip
    cols[2].metric("Client-visible RTO", components.seconds(report["client_rto_seconds"]))
    cols[3].metric(
        "Full capacity", components.seconds(report.get("full_capacity_seconds")),
        "normal tier ready", "off",
    )  # fmt: skip
    rpo = [v for v in (report["rpo_seconds"] or {}).values() if v is not None]
    cols[4].metric(
        "Worst RPO", components.seconds(max(rpo) if rpo else None),
        f"target {components.seconds(m.get('rpo_target_seconds'))}", "off",
    )  # fmt: skip


def _who_and_when(run: dict[str, Any]) -> None:
    st.caption(
        f"Operator **{run['operator']}** — reason: {run['reason'] or '—'} — started "
        f"{components.when(run['started_at'])} — T0 {components.when(run['t0'])} — finished "
        f"{components.when(run['finished_at'])}"
    )


def _run_link(run_id: str | None, label: str) -> None:
    if run_id:
        st.page_link(
            "app_pages/history.py", label=f"{label} `{run_id}`", icon=":material/link:",
            query_params={"run": run_id},
        )  # fmt: skip


def _incident_record(record: dict[str, Any] | None, run_id: str) -> None:
    """One incident from declaration to close: the takeover and its failback, linked both
    ways (drills.store.incident_record, as `drills report` shows it)."""
    if record is None:
        return
    state = "open: still served from DR" if record["open"] else "closed"
    with st.container(border=True):
        st.markdown(f"**Incident record** — {state}")
        if record["incident_run"] != run_id:
            _run_link(record["incident_run"], "Its incident: run")
        if record["failback_run"] and record["failback_run"] != run_id:
            _run_link(record["failback_run"], "Failed back by run")
        moments = (
            ("declared (T0)", record["declared"]), ("taken over", record["taken_over"]),
            ("held at DR from", record["held_from"]),
            ("way back checked", record["way_back_checked"]),
            ("failed back", record["failed_back"]), ("closed", record["closed"]),
        )  # fmt: skip
        rows = [{"moment": what, "when": components.when(at)} for what, at in moments]
        st.markdown(components.markdown_table(rows))
        served = components.seconds(record["served_from_dr_seconds"])
        st.markdown(
            f"- **Served from DR:** {served}{' (still)' if record['open'] else ''}\n"
            f"- **Written at DR:** {record['written_at_dr']} object(s); **copied back and "
            f"readable at the primary:** {record['copied_back']}\n"
            f"- **Failback downtime:** {components.seconds(record['failback_downtime_seconds'])}"
        )


def _what_went_wrong(report: dict[str, Any]) -> None:
    if report["run"].get("error"):
        st.error(report["run"]["error"])
    if report.get("unfenced"):
        st.error(
            "The primary was unreachable and was NOT fenced (forced).", icon=":material/warning:"
        )


def _downloads(report: dict[str, Any]) -> None:
    run_id = report["run"]["id"]
    left, right = st.columns(2)
    left.download_button(
        "Download report (Markdown)", data.report_markdown(report),
        file_name=f"drill-{run_id}.md", mime="text/markdown", key=f"{KEY}.md",
    )  # fmt: skip
    right.download_button(
        "Download report (JSON)", json.dumps(report, indent=2, default=str),
        file_name=f"drill-{run_id}.json", mime="application/json", key=f"{KEY}.json",
    )  # fmt: skip


def _evidence_pack(settings: UISettings, run: dict[str, Any]) -> None:
    access = auth.current_access(settings)
    if not access.can_declare:
        # Made on the click, outside this script run: only operators get the button at all.
        st.caption(f"Its evidence pack (signed) is for the operator role: {access.why_not}.")
        return
    keyid, problem = data.signing_key()
    if problem is not None:
        problem = f"the signing key cannot be used. {problem}"
    else:
        problem = data.pack_problem()
    if problem is not None:
        st.error(f"No evidence pack: {problem}")
        return
    run_id, store, who = run["id"], data.store(settings), guard.actor(access)
    st.download_button(
        "Download evidence pack", lambda: data.exported_pack(store, run_id, who),
        file_name=f"evidence-{run_id}.zip", mime="application/zip", key=f"{KEY}.evidence",
        help="The report (Markdown, JSON, PDF) and the run's records, hashed and signed: "
        "check it with `drills evidence verify PACK --public-key signing.pub`.",
        on_click="ignore",
    )  # fmt: skip
    st.caption(
        f"Signed with key `{keyid[:16]}…`." if keyid
        else "**Unsigned:** no signing key is configured (`DRILLS_SIGNING_KEY`)."
    )  # fmt: skip


def _demand_carried(report: dict[str, Any]) -> None:
    capacity = report.get("capacity")
    t0 = (report.get("run") or {}).get("t0")
    if not capacity or not t0:
        return
    st.markdown(f"**Demand carried at DR:** {for_markdown(str(capacity.get('summary', '')))}")
    if any(row.get("over_time") for row in capacity.get("services") or []):
        st.altair_chart(carry_chart(capacity, dt.datetime.fromisoformat(t0)), width="stretch")


def _slos_after_the_switch(report: dict[str, Any]) -> None:
    slos = report.get("slo") or []
    if not slos:
        return
    st.markdown("**SLOs after the switch**")
    for slo in slos:
        st.markdown(f"- {for_markdown(str(slo.get('line') or slo.get('name')))}")
    if any(slo.get("values") for slo in slos):
        target = (report.get("measurement") or {}).get("rto_target_seconds")
        st.altair_chart(slo_chart(slos, target), width="stretch")


def _timeline(phases: list[dict[str, Any]] | None) -> None:
    if phases:
        st.altair_chart(charts.gantt(phases), width="stretch")
    else:
        st.info("No phase was recorded.")


def _steps_and_evidence(phases: list[dict[str, Any]]) -> None:
    for phase in phases:
        st.markdown(
            f"**{phase['name']}** — {phase['status']}, {components.seconds(phase['seconds'])}"
        )
        for step in phase["steps"]:
            label = f"{step['status']}: {step['name']} ({components.seconds(step['seconds'])})"
            with st.expander(label):
                st.write(step["result"] or "—")
                if step["evidence"]:
                    st.json(step["evidence"], expanded=1)


def _journal(entries: list[dict[str, Any]]) -> None:
    if entries:
        st.dataframe(entries, hide_index=True, width="stretch")
    else:
        st.info("No change was made.")


def _readiness_at_t0(report: dict[str, Any]) -> None:
    snapshot = data.readiness_snapshot(report)
    if snapshot is None:
        st.info("No readiness snapshot was taken for this run.")
    else:
        components.readiness_checklist(snapshot, at=snapshot.checked_at)


def main() -> None:
    settings = load_settings()
    st.title("Drill history")
    plan, mode, verdict = _filters(settings)
    page = st.session_state.get(f"{KEY}.page", 0)
    rows, more = data.runs_page(settings.db_url, plan, mode, verdict, page)
    points = data.rto_points(settings.db_url, plan, mode)
    if charts.takeovers(points):
        st.altair_chart(charts.rto_trend(points), width="stretch")
        note = charts.target_note(points)
        if note:
            st.caption(note)
    if not rows:
        filtered = any((plan, mode, verdict))
        st.info(
            "No run matches these filters."
            if filtered
            else "No drill has run yet. Run one with `drills run PLAN` or the Prefect deployment."
        )
        return
    # The date and the run id stay in view however narrow the window: the id is what
    # `drills report` takes, and it was the column cut off at 1280 px.
    pinned = {c: st.column_config.TextColumn(c, pinned=True) for c in ("date", "run")}
    st.dataframe(_table(rows), hide_index=True, width="stretch", column_config=pinned)
    _pager(page, more)
    wanted = st.query_params.get("run")
    ids = [r.id for r in rows]
    if wanted and wanted not in ids:
        ids.insert(0, wanted)
    labels = {r.id: f"{components.when(r.started_at)} · {r.plan} · {r.mode} · {r.id}" for r in rows}
    chosen = st.selectbox(
        "Run detail", ids, index=ids.index(wanted) if wanted in ids else 0,
        format_func=lambda i: labels.get(i, i), key=f"{KEY}.run",
    )  # fmt: skip
    if chosen:
        _detail(settings, chosen)


main()
