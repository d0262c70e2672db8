"""Readiness: are we ready to take over? The latest checklist of each plan, and a re-run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from drills.checks import FORECAST_CHECK, CheckResult, ReadinessReport
from drills.errors import TargetError
from ui import auth, components, data, guard, launches
from ui.auth import Access
from ui.components import seconds
from ui.data import PlanEntry
from ui.settings import UISettings, load_settings

KEY = "readiness"


def _flow_run_key(entry: PlanEntry) -> str:
    return f"{KEY}.flow_run.{entry.name}"


def _run_inline(settings: UISettings, entry: PlanEntry) -> None:
    total = data.check_count()
    bar = st.progress(0.0, text=f"Running {total} checks here…")
    done: list[CheckResult] = []

    def advance(result: CheckResult) -> None:
        done.append(result)
        bar.progress(len(done) / total, text=f"{len(done)}/{total}: {result.title} {result.status}")

    report = data.run_readiness_inline(settings, entry, advance)
    bar.progress(1.0, text=f"Done: {len(report.results)} checks")


def _start(settings: UISettings, access: Access, entry: PlanEntry) -> None:
    """Run the plan's checks: on Prefect when its readiness deployment is there, else here.
    Only for the operator role, checked here whatever the page showed, and audited."""
    if not guard.allowed(settings, access, action=guard.READINESS_ACTION, plan=entry.name,
                         what="re-running the readiness checks"):  # fmt: skip
        return
    state = launches.prefect_state(settings)
    if state.usable and launches.deployment_exists(
        settings.prefect_api_url or "", settings.readiness_deployment
    ):
        try:
            flow_run_id = launches.start_readiness_run(settings, entry)
            st.session_state[_flow_run_key(entry)] = flow_run_id
            _audit_start(settings, access, entry, f"started Prefect flow run {flow_run_id}")
            return
        except TargetError as exc:
            st.warning(f"Prefect did not start the readiness run ({exc}); running here instead.")
    elif settings.prefect_configured:
        st.caption(
            f"Running here: {state.problem or f'no {settings.readiness_deployment} deployment'}."
        )
    _audit_start(settings, access, entry, "ran the checks in the dashboard's process")
    _run_inline(settings, entry)


def _audit_start(settings: UISettings, access: Access, entry: PlanEntry, outcome: str) -> None:
    guard.accepted(settings, access, action=guard.READINESS_ACTION, plan=entry.name,
                   what="re-running the readiness checks", outcome=outcome)  # fmt: skip


@st.fragment(run_every=2)
def _watch(settings: UISettings, entry: PlanEntry, flow_run_id: str) -> None:
    """Progress of a readiness run on Prefect; the page refreshes when it ends."""
    info = launches.flow_run(settings, flow_run_id)
    total = data.check_count()
    if info is None:
        st.warning(f"Cannot read flow run {flow_run_id} from Prefect.")
        return
    link = settings.flow_run_url(flow_run_id)
    where = f" — [open in Prefect]({link})" if link else ""
    if info.state_type == "SCHEDULED":
        st.info(f"Readiness run {info.name} is scheduled, waiting for a worker{where}.")
    st.progress(
        min(1.0, info.completed_tasks / max(total, 1)),
        text=f"Prefect run {info.name}: {info.state_name}, {info.completed_tasks}/{total} checks"
        f"{where}",
    )
    if info.final:
        del st.session_state[_flow_run_key(entry)]
        data.clear_caches()
        st.rerun(scope="app")


def _plan_tab(settings: UISettings, access: Access, entry: PlanEntry) -> None:
    left, right = st.columns([4, 1])
    left.caption(f"Plan file `{entry.shown}`")
    # Shown to everyone, so that a click without the operator role is refused and audited
    # rather than lost; the checks reach the real sites.
    if right.button(
        "Re-run checks", key=f"{KEY}.rerun.{entry.name}", type="secondary",
        help="Runs every check against the real sites: needs the operator role.",
    ):  # fmt: skip
        _start(settings, access, entry)
    flow_run_id = st.session_state.get(_flow_run_key(entry))
    if flow_run_id:
        _watch(settings, entry, flow_run_id)
    report = data.latest_readiness(settings.db_url, entry.name)
    if report is None:
        st.info("Not checked yet. **Re-run checks** runs every readiness check now.")
        return
    if report.blocking:
        components.readiness_checklist(report, after_blocking=_forecast_if_fixed(report))
        return
    _forecast_line(report)
    components.readiness_checklist(report)


def _tabs(settings: UISettings, access: Access, valid: list[PlanEntry]) -> None:
    labels = []
    for entry in valid:
        icon, words = components.overall(data.latest_readiness(settings.db_url, entry.name))
        labels.append(f"{icon} {entry.name} — {words}")
    for entry, tab in zip(valid, st.tabs(labels), strict=True):
        with tab:
            _plan_tab(settings, access, entry)


def _one_of_many(settings: UISettings, access: Access, valid: list[PlanEntry]) -> None:
    chosen = components.plan_picker(f"{KEY}.plan", [e.name for e in valid])
    entry = next(e for e in valid if e.name == chosen)
    icon, words = components.overall(data.latest_readiness(settings.db_url, entry.name))
    st.subheader(f"{icon} {entry.name} — {words}")
    _plan_tab(settings, access, entry)


def _forecast(report: ReadinessReport) -> Mapping[str, Any] | None:
    """The evidence of the snapshot's forecast check, when it could forecast."""
    found = next((r for r in report.results if r.id == FORECAST_CHECK), None)
    if found is None or found.evidence.get("rto_seconds") is None:
        return None
    return found.evidence


def _estimate(e: Mapping[str, Any]) -> str:
    return f"about {seconds(e['rto_seconds'])} (target {seconds(e.get('rto_target_seconds'))})"


def _forecast_line(report: ReadinessReport) -> None:
    """ "A takeover now: about N s (target M)", the headline of a plan nothing blocks."""
    e = _forecast(report)
    if e is None:
        return
    low, high = (e.get("interval") or [None, None])[:2]
    span = f"{seconds(low)} to {seconds(high)}; " if low is not None else ""
    st.metric("A takeover now", f"about {seconds(e['rto_seconds'])}",
              help=f"{span}{e.get('basis', '')}")  # fmt: skip
    st.caption(f"a takeover now: {_estimate(e)} · {e.get('basis', '')}")


def _forecast_if_fixed(report: ReadinessReport) -> str:
    """On a blocked plan the forecast is a plain line under the failures, and says what it
    assumes: as a headline it would read as a promise that a takeover now would work."""
    e = _forecast(report)
    if e is None:
        return ""
    return (f"Once the blocking checks are fixed, a takeover would take {_estimate(e)} "
            f"· {e.get('basis', '')}")  # fmt: skip


def main() -> None:
    settings = load_settings()
    access = auth.current_access(settings)
    st.title("Readiness")
    entries = data.plans(settings)
    valid = [e for e in entries if e.valid]
    wanted = st.query_params.get("plan")  # the Fleet page's link: that plan only
    if not valid:
        st.info(
            "No valid plan is configured. Set `DRILLS_PLANS` to your plan files, or run "
            "`make demo` to start the lab and its plan."
        )
    elif len(valid) > components.MAX_TABS:
        _one_of_many(settings, access, valid)
    else:
        if wanted and any(e.name == wanted for e in valid):
            valid = [e for e in valid if e.name == wanted]
            if st.button("Show every plan", key=f"{KEY}.every"):
                st.query_params.clear()
                st.rerun()
        _tabs(settings, access, valid)
    if valid and not access.can_declare:
        st.caption(f"Re-running the checks needs the operator role: {access.why_not}.")
        auth.sign_in(settings, access, f"{KEY}.sign_in")
    invalid = [e for e in entries if not e.valid]
    if invalid:
        names = ", ".join(f"`{e.shown}`" for e in invalid)
        st.warning(f"Not checked, the plan is invalid: {names}. See the Plans page.")


main()
