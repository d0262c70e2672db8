"""The Cancel control of a drill or incident that runs as a Prefect flow run.

Cancelling goes through Prefect, as its own UI's Cancel does: the worker stops the
flow run's process with SIGTERM, on which a drill rolls back to the state before it
and an incident stops where it is and reports. Both the page and the audit log say
who asked.
"""

from __future__ import annotations

import streamlit as st

from drills.orchestrator import FlowRunProgress
from drills.store import Mode
from ui import components, data, guard, launches
from ui.auth import Access
from ui.settings import UISettings

CONSEQUENCE: dict[str, str] = {
    Mode.DRILL: "it rolls back at once, to the state before the drill.",
    Mode.PRACTICE: "it rolls back at once: the practice name restored, DR back to standby.",
    Mode.INCIDENT: (
        "the takeover **stops where it is**: the primary stays fenced and DR stays as far "
        "up as it got. Decide afterwards with `drills recover RUN --complete` or `--hold`."
    ),
    Mode.FAILBACK: (
        "before its DNS switch the failback is **undone**: DR serves exactly as before; after "
        "it, the failback completes forward."
    ),
}


def cancel_control(
    settings: UISettings,
    access: Access,
    info: FlowRunProgress | None,
    *,
    flow_run_id: str,
    plan_name: str,
    mode: str,
    run_id: str | None,
    key: str,
    name: str | None = None,
) -> None:
    """A confirm box and a Cancel button; after a click, what Prefect answered.

    ``info`` is the flow run as the page just read it (None when it could not). The
    audit log names the signed-in user, else ``name`` (as typed on the page).
    """
    asked = f"{key}.cancel_asked"
    if st.session_state.get(asked) == flow_run_id:
        st.info(
            "Cancel requested: waiting for the worker to stop the run.",
            icon=":material/hourglass_top:",
        )
        return
    prefect = launches.prefect_state(settings)
    if not prefect.usable:
        st.caption(f"Cancelling it from here needs its Prefect server, but {prefect.problem}.")
        return
    if info is not None and info.final:
        if run_id is not None:
            st.warning(
                f"Its flow run ended {info.state_name}, but the run never finished: it "
                f"crashed part-way. `drills recover {run_id}` puts things back in order.",
                icon=":material/warning:",
            )
        return
    if not access.can_declare:
        st.caption(f"Cancelling a run needs the operator role: {access.why_not}.")
        return
    sure = st.checkbox(
        f"Cancel this {mode} run: {CONSEQUENCE.get(mode, CONSEQUENCE[Mode.DRILL])}",
        key=f"{key}.cancel_sure",
    )
    clicked = st.button(
        f"Cancel the {mode} run",
        key=f"{key}.cancel",
        disabled=not sure,
        icon=":material/stop_circle:",
    )
    if not clicked or not guard.allowed(
        settings, access, action=data.CANCEL_ACTION, plan=plan_name,
        what=f"cancelling the {mode} run", detail={"flow_run_id": flow_run_id, "run_id": run_id},
    ):  # fmt: skip
        return
    who = access.user or (name or "").strip() or "anonymous (no sign-in configured)"
    outcome = launches.cancel_run(
        settings, flow_run_id=flow_run_id, plan_name=plan_name, run_id=run_id, who=who
    )
    if outcome.accepted:
        st.session_state[asked] = flow_run_id
        st.warning(
            f"Cancel requested at {components.when(components.now())} by {who}: the flow run "
            f"is {outcome.state_name}; {outcome.detail}.",
            icon=":material/stop_circle:",
        )
    else:
        st.error(f"Not cancelled: {outcome.detail}.", icon=":material/block:")
