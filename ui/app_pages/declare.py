"""The incident page: declare an incident (a real failover to DR), and while a plan serves
from DR, check the way back and fail back; watch either run live (and cancel it), and
see who did what."""

from __future__ import annotations

import datetime as dt
import getpass

import streamlit as st

from drills.store import Mode
from drills.takeover import DECLARE_ACTION, FAILBACK_ACTION
from drills.text import for_markdown
from ui import auth, components, data, guard, launches, proposals
from ui.auth import Access
from ui.data import PlanEntry
from ui.live_run import DONE, KEY, RUN, follow, watch_section
from ui.settings import UISettings, load_settings

FB = f"{KEY}.fb"  # the Fail back form's widgets
FAILBACK_BUTTON = "Fail back"


def _operator(access: Access, key: str, doing: str, *, disabled: bool = False) -> str:
    """Who acts: the signed-in user, else a name typed (lab mode)."""
    if access.user:
        st.caption(f"{doing} as **{for_markdown(access.user)}**")
        return access.user
    return st.text_input("Your name", value=getpass.getuser(), key=key, disabled=disabled)


def _follow_incident(flow_run_id: str, plan_name: str, at: dt.datetime, who: str) -> None:
    follow(flow_run_id, plan_name, Mode.INCIDENT, at, who)


def _busy(settings: UISettings) -> str | None:
    """Why no other incident or failback may be started from here now, if one is going."""
    going = data.runs_going(settings, tuple(e.name for e in data.plans(settings) if e.valid))
    if going:
        plan, mode = going[0]
        article = "an" if mode[:1] in "aeiou" else "a"
        return f"{article} {mode} run of **{for_markdown(plan)}** is going: wait for it to end"
    watched = st.session_state.get(RUN)
    if watched and st.session_state.get(DONE) != watched:
        return "the run watched above has not ended yet"
    return None


def _form(settings: UISettings, access: Access, entries: list[PlanEntry], busy: str | None) -> None:
    st.header("Declare an incident")
    if not entries:
        st.info("No valid plan serves from its primary, so there is nothing to fail over.")
        return
    if busy:
        st.info(f"Declaring is off while {busy}.", icon=":material/hourglass_top:")
    by_name = {e.name: e for e in entries}
    off = busy is not None
    plan_name = st.selectbox("Plan to fail over", list(by_name), key=f"{KEY}.plan", disabled=off)
    operator = _operator(access, f"{KEY}.operator", "Declaring", disabled=off)
    reason = st.text_area(
        "Reason", key=f"{KEY}.reason", placeholder="What happened, and the ticket or bridge",
        disabled=off,
    )  # fmt: skip
    force = st.checkbox(
        "Go on even if the primary cannot be fenced (force-unfenced)", key=f"{KEY}.force",
        disabled=off,
    )  # fmt: skip
    if force:
        st.warning(
            "If the primary is unreachable it will **not** be fenced. It may still serve "
            "writes when it comes back: both sites could accept writes at once (split brain). "
            "Use this only when you know the primary is down for good.",
            icon=":material/warning:",
        )
    confirmation = st.text_input(
        f"Type the plan name **{plan_name}** to confirm", key=f"{KEY}.confirm", disabled=off
    )
    declare_clicked = st.button(
        "Declare incident and start the failover", key=f"{KEY}.go", type="primary", disabled=off
    )
    if declare_clicked:
        if not guard.allowed(settings, access, action=DECLARE_ACTION, plan=plan_name,
                             what="declaring an incident"):  # fmt: skip
            return
        declared_at = components.now()  # T0 is the click, not when a worker picks it up
        declaration = launches.declare(
            settings,
            by_name[plan_name],
            operator=operator,
            reason=reason,
            confirmation=confirmation,
            force_unfenced=force,
            declared_at=declared_at,
        )
        if declaration.accepted and declaration.flow_run_id:
            follow(declaration.flow_run_id, plan_name, Mode.INCIDENT, declared_at, operator)
            st.success(f"Incident declared at {components.when(declared_at)}. T0 is set.")
            st.rerun()
        else:
            st.error(
                f"Incident **not** declared — {declaration.message}",
                icon=":material/block:",
            )


def _way_back(settings: UISettings, access: Access, entry: PlanEntry) -> None:
    """Where the plan serves from, and the way-back readiness, checked live for operators."""
    st.header(f"{entry.name}: serving from DR")
    recorded = dict(data.serving_from_dr(settings.db_url)).get(entry.name)
    if recorded is not None and recorded.incident_id:
        st.markdown(
            f"Incident `{recorded.incident_id}` — declared {components.when(recorded.incident_t0)}"
            f", DR serving since {components.when(recorded.since)}."
        )
        st.page_link(
            "app_pages/history.py", label="The incident in the drill history",
            icon=":material/monitoring:", query_params={"run": recorded.incident_id},
        )  # fmt: skip
        incident_report = data.run_report(settings.db_url, recorded.incident_id)
        components.detection_line(incident_report)
        components.gates_table(incident_report)
    st.subheader("Readiness for the way back (DR → primary)", divider="gray")
    if not access.can_declare:
        # Its checks probe both sites (the TSIG-signed DNS control, secrets): not on a view.
        st.info(
            f"The way back is checked live against both sites, for the operator role only: "
            f"{access.why_not}.",
            icon=":material/lock:",
        )
        return
    if st.button("Check the way back again", key=f"{FB}.recheck.{entry.name}"):
        data.recheck_wayback()
    components.readiness_checklist(data.wayback(settings, entry, guard.actor(access)))


def _failback_form(
    settings: UISettings, access: Access, entry: PlanEntry, busy: str | None
) -> None:
    st.subheader("Fail back", divider="gray")
    if not launches.deployment_exists(settings.prefect_api_url or "", settings.failback_deployment):
        st.error(
            f"The Prefect server has no `{settings.failback_deployment}` deployment. Deploy it "
            "(`prefect deploy --all` from the project) and start a worker for it.",
            icon=":material/power_off:",
        )
        return
    st.markdown(
        "Brings production home: stop the DR writers, wait until every DR write is readable "
        "at the primary, bring the primary up tier by tier, switch DNS back, smoke through "
        "the name, then return DR to standby. Before the DNS switch a failure puts DR back "
        "exactly as it serves now."
    )
    key = f"{FB}.{entry.name}"
    off = busy is not None
    if busy:
        st.info(f"Failing back is off while {busy}.", icon=":material/hourglass_top:")
    operator = _operator(access, f"{key}.operator", "Failing back", disabled=off)
    reason = st.text_area("Reason for failing back", key=f"{key}.reason", disabled=off,
                          placeholder="Why the primary is fit again, and the ticket")  # fmt: skip
    confirmation = st.text_input(
        f"Type the plan name **{entry.name}** to confirm the failback", key=f"{key}.confirm",
        disabled=off,
    )  # fmt: skip
    if st.button(FAILBACK_BUTTON, key=f"{key}.go", type="primary", disabled=off):
        if not guard.allowed(settings, access, action=FAILBACK_ACTION, plan=entry.name,
                             what="failing back"):  # fmt: skip
            return
        requested_at = components.now()
        decision = launches.fail_back(
            settings, entry, operator=operator, reason=reason, confirmation=confirmation,
            requested_at=requested_at,
        )  # fmt: skip
        if decision.accepted and decision.flow_run_id:
            follow(decision.flow_run_id, entry.name, Mode.FAILBACK, requested_at, operator)
            st.rerun()
        else:
            st.error(f"Failback **not** started — {decision.message}", icon=":material/block:")


def _audit_log(settings: UISettings) -> None:
    rows = data.declarations(settings.db_url)
    title = f"Audit log: the last {len(rows)} actions and sign-ins, accepted or refused"
    with st.expander(title, expanded=False):
        if not rows:
            st.caption("Nothing has been done or asked for from here.")
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


def _prefect_problem(settings: UISettings) -> str | None:
    """Why nothing can be started from here (no usable Prefect, no incident deployment)."""
    state = launches.prefect_state(settings)
    if not state.usable:
        return (
            f"**A Prefect server is needed to declare an incident**: {state.problem}. The "
            f"failover runs as the `{settings.incident_deployment}` deployment, so it survives "
            "this page being closed. Set `PREFECT_API_URL` and start a worker for it."
        )
    assert settings.prefect_api_url is not None
    if not launches.deployment_exists(settings.prefect_api_url, settings.incident_deployment):
        return (
            f"The Prefect server has no `{settings.incident_deployment}` deployment. Deploy it "
            "(`prefect deploy --all` from the project) and start a worker for it."
        )
    return None


def _actions(settings: UISettings, access: Access, at_dr: list[PlanEntry]) -> None:
    """Fail back for each plan at DR, and the declaration for the others; operators only."""
    if not access.can_declare:
        what = "declare an incident or fail back" if at_dr else "declare an incident"
        st.warning(f"You may not {what}: {access.why_not}.", icon=":material/lock:")
        auth.sign_in(settings, access, f"{KEY}.sign_in")
        return
    busy = _busy(settings)
    for entry in at_dr:
        _failback_form(settings, access, entry, busy)
    away = {e.name for e in at_dr}
    home = [e for e in data.plans(settings) if e.valid and e.name not in away]
    _form(settings, access, home, busy)


def main() -> None:
    settings = load_settings()
    access = auth.current_access(settings)
    st.title("Incident")
    st.markdown(
        "**Declare an incident** starts a **real failover** (a minimum takeover): fence the "
        "primary, bring DR's critical tier up, switch DNS as soon as it is ready and smoke "
        "through the name (the RTO), then the normal tier; the batch tier stays paused. "
        "Nothing fails back on its own: while a plan serves from DR, this page checks the way "
        "back and offers **Fail back**."
    )
    # The live view's place comes before anything that changes with where a plan serves
    # (the way back goes when a failback ends): at a moving place, the render at the run's
    # end drew the outcome and its links a second time beside the fragment's stale copy.
    watch_slot = st.container()
    at_dr_names = {plan for plan, _ in data.serving_from_dr(settings.db_url)}
    at_dr = [e for e in data.plans(settings) if e.valid and e.name in at_dr_names]
    for entry in at_dr:
        _way_back(settings, access, entry)
    problem = _prefect_problem(settings)
    if problem is not None:
        st.error(problem, icon=":material/power_off:")
        _audit_log(settings)
        return
    with watch_slot:
        watch_section(settings, access)
    busy = _busy(settings) if access.can_declare else None
    valid = [e for e in data.plans(settings) if e.valid]
    proposals.section(settings, access, valid, busy, _follow_incident)
    _actions(settings, access, at_dr)
    _audit_log(settings)


main()
