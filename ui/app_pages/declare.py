"""Declare incident: start a real failover to DR, watch it live (and cancel it), and see
who did what."""

from __future__ import annotations

import datetime as dt
import getpass
from typing import Any

import streamlit as st

from drills.orchestrator.flow_runs import FlowRunProgress
from drills.store.kinds import Mode, RunStatus
from drills.text import for_markdown
from ui import auth, components, data
from ui.auth import Access
from ui.cancel import cancel_control
from ui.queries import RunRow
from ui.settings import UISettings, load_settings

KEY = "declare"
RUN = f"{KEY}.flow_run"
T0 = f"{KEY}.declared_at"
PLAN = f"{KEY}.plan_name"
DONE = f"{KEY}.done"
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


def _clock(row: RunRow | None, declared_at: dt.datetime | None) -> str:
    """The RTO clock, from the click (T0): the RTO once measured, else the time since."""
    if row and row.rto_seconds is not None:
        return components.seconds(row.rto_seconds)
    t0 = (row.t0 if row else None) or declared_at
    if t0 is None:
        return "—"
    return components.seconds((components.now() - t0).total_seconds()) + " and counting"


def _step_line(step: dict[str, Any], t0: dt.datetime | None) -> str:
    ended = step.get("ended_at")
    when = ""
    if ended and t0 is not None:
        when = f"T0+{(dt.datetime.fromisoformat(ended) - t0).total_seconds():.1f} s, "
    took = f"{step['seconds']:.1f} s" if ended else "running"
    result = f": {step['result']}" if step.get("result") else ""
    return f"- {STEP_ICON.get(step['status'], '')} {step['name']} ({when}{took}){result}"


def _timeline(phases: list[dict[str, Any]], t0: dt.datetime | None) -> None:
    """Each phase with its steps, each step as soon as it ended, running ones marked."""
    for phase in phases:
        going = "" if phase.get("ended_at") else " (going on)"
        st.markdown(f"**{phase['name']}**{going} {STEP_ICON.get(phase['status'], '')}")
        lines = [_step_line(step, t0) for step in phase["steps"]]
        if lines:
            st.markdown("\n".join(lines))


def _outcome(info: FlowRunProgress | None, row: RunRow | None) -> bool:
    """How the run ended, once it has; True then."""
    # An incident stopped part-way ends its flow run but stays unfinished in the history.
    finished = bool(info and info.final and (row is None or row.status != RunStatus.RUNNING))
    if finished and row is not None:
        if row.status == RunStatus.SUCCEEDED:
            st.success(f"The takeover finished: {row.status}. DR is serving.")
        else:
            why = for_markdown(row.error or "see the report")
            st.error(f"The incident run ended {row.status}: {why}")
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
    info = data.flow_run(settings, flow_run_id)
    plan_name = st.session_state.get(PLAN) or ""
    declared_at: dt.datetime | None = st.session_state.get(T0)
    row = data.live_run(settings, flow_run_id, plan_name, declared_at)
    link = settings.flow_run_url(flow_run_id)
    st.subheader(f"Incident run {info.name if info else flow_run_id}")
    if link:
        st.link_button("Open this run in the Prefect UI", link)
    report = data.live_report(settings, row.id) if row else None
    phases: list[dict[str, Any]] = (report or {}).get("phases") or []
    cols = st.columns(4)
    cols[0].metric("State", info.state_name if info else "unknown")
    cols[1].metric("Current phase", _current_phase(info, row, phases))
    cols[2].metric("RTO clock (since T0)", _clock(row, declared_at))
    cols[3].metric("Verdict", components.verdict_label(row.verdict) if row else "—")
    if info is not None and not info.final:
        cancel_control(
            settings, access, info, flow_run_id=flow_run_id, plan_name=plan_name,
            mode=Mode.INCIDENT, run_id=row.id if row else None, key=KEY,
            name=st.session_state.get(f"{KEY}.operator"),
        )  # fmt: skip
    _timeline(phases, (row.t0 if row else None) or declared_at)
    return _outcome(info, row)


@st.fragment(run_every=2)
def _watch(settings: UISettings, access: Access, flow_run_id: str) -> None:
    if _live(settings, access, flow_run_id):
        st.session_state[DONE] = flow_run_id
        st.rerun(scope="app")  # once more as a whole page, without the timer


def _watch_section(settings: UISettings, access: Access) -> None:
    flow_run_id = st.session_state.get(RUN) or st.query_params.get("flow_run")
    if not flow_run_id:
        return
    with st.container(border=True):
        if st.session_state.get(DONE) == flow_run_id:
            _live(settings, access, flow_run_id)
        else:
            _watch(settings, access, flow_run_id)


def _form(settings: UISettings, access: Access) -> None:
    entries = [e for e in data.plans(settings) if e.valid]
    if not entries:
        st.info("No valid plan is configured, so there is nothing to fail over.")
        return
    by_name = {e.name: e for e in entries}
    plan_name = st.selectbox("Plan to fail over", list(by_name), key=f"{KEY}.plan")
    if access.user:
        operator = access.user
        st.caption(f"Declaring as **{for_markdown(operator)}**")
    else:
        operator = st.text_input("Your name", value=getpass.getuser(), key=f"{KEY}.operator")
    reason = st.text_area(
        "Reason", key=f"{KEY}.reason", placeholder="What happened, and the ticket or bridge"
    )
    force = st.checkbox(
        "Go on even if the primary cannot be fenced (force-unfenced)", key=f"{KEY}.force"
    )
    if force:
        st.warning(
            "If the primary is unreachable it will **not** be fenced. It may still serve "
            "writes when it comes back: both sites could accept writes at once (split brain). "
            "Use this only when you know the primary is down for good.",
            icon=":material/warning:",
        )
    confirmation = st.text_input(
        f"Type the plan name **{plan_name}** to confirm", key=f"{KEY}.confirm"
    )
    if st.button("Declare incident and start the failover", key=f"{KEY}.go", type="primary"):
        declared_at = components.now()  # T0 is the click, not when a worker picks it up
        declaration = data.declare(
            settings,
            by_name[plan_name],
            operator=operator,
            reason=reason,
            confirmation=confirmation,
            force_unfenced=force,
            declared_at=declared_at,
        )
        if declaration.accepted and declaration.flow_run_id:
            st.session_state[RUN] = declaration.flow_run_id
            st.session_state[T0] = declared_at
            st.session_state[PLAN] = plan_name
            st.query_params["flow_run"] = declaration.flow_run_id
            st.success(f"Incident declared at {components.when(declared_at)}. T0 is set.")
            st.rerun()
        else:
            st.error(
                f"Incident **not** declared — {declaration.message}",
                icon=":material/block:",
            )


def _audit_log(settings: UISettings) -> None:
    rows = data.declarations(settings.db_url)
    with st.expander(f"Audit log: the last {len(rows)} declarations and cancels", expanded=False):
        if not rows:
            st.caption("No incident has been declared, and no run cancelled, from here.")
            return
        st.dataframe(
            [
                {
                    "when": components.when(r.at),
                    "action": r.action,
                    "who": r.who,
                    "plan": r.plan,
                    "accepted": "yes" if r.accepted else "refused",
                    "why": r.reason,
                    "outcome": r.outcome,
                }
                for r in rows
            ],
            hide_index=True,
        )


def main() -> None:
    settings = load_settings()
    access = auth.current_access(settings)
    st.title("Declare incident")
    st.markdown(
        "Starts a **real failover**: fence the primary, bring the DR site up tier by tier, "
        "switch DNS and measure the RTO. Nothing fails back on its own."
    )
    state = data.prefect_state(settings)
    if not state.usable:
        st.error(
            f"**A Prefect server is needed to declare an incident**: {state.problem}. The "
            f"failover runs as the `{settings.incident_deployment}` deployment, so it survives "
            "this page being closed. Set `PREFECT_API_URL` and start a worker for it.",
            icon=":material/power_off:",
        )
        _audit_log(settings)
        return
    assert settings.prefect_api_url is not None
    if not data.deployment_exists(settings.prefect_api_url, settings.incident_deployment):
        st.error(
            f"The Prefect server has no `{settings.incident_deployment}` deployment. Deploy it "
            "(`prefect deploy --all` from the project) and start a worker for it.",
            icon=":material/power_off:",
        )
        _audit_log(settings)
        return
    _watch_section(settings, access)
    if not access.can_declare:
        st.warning(f"You may not declare an incident: {access.why_not}.", icon=":material/lock:")
        auth.sign_in(settings, access, f"{KEY}.sign_in")
    else:
        _form(settings, access)
    _audit_log(settings)


main()
