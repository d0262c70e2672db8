"""Plans: is each plan valid, what does it cover, and when does it next run?"""

from __future__ import annotations

import streamlit as st

from drills.store.kinds import Mode
from drills.text import for_markdown
from ui import components, data, plan_summary
from ui.data import PlanEntry
from ui.settings import UISettings, load_settings

KEY = "plans"


def _next_drill(settings: UISettings, entry: PlanEntry) -> str:
    assert entry.plan is not None
    in_plan = entry.plan.schedule
    fallback = (
        f"the plan says `{in_plan.cron}` ({in_plan.timezone})" if in_plan else "not scheduled"
    )
    state = data.prefect_state(settings)
    if not state.usable or settings.prefect_api_url is None:
        return f"unknown: {state.problem}; {fallback}"
    info = data.deployment(
        settings.prefect_api_url, settings.drill_deployment, entry.path, entry.name
    )
    if info is None:
        return f"no `{settings.drill_deployment}` deployment on Prefect; {fallback}"
    schedules = "; ".join(info.schedules) or "no schedule"
    if info.next_run is not None:
        return f"**{components.when(info.next_run)}** ({settings.drill_deployment}: {schedules})"
    return f"none scheduled for this plan ({settings.drill_deployment}: {schedules}); {fallback}"


def _last_drill(settings: UISettings, entry: PlanEntry) -> str:
    run = data.last_run(settings.db_url, entry.name, Mode.DRILL)
    if run is None:
        return "never drilled"
    return (
        f"{components.when(run.started_at)} — **{components.verdict_label(run.verdict)}**, "
        f"RTO {components.versus(run.rto_seconds, run.rto_target)} (run `{run.id}`)"
    )


def _plan(settings: UISettings, entry: PlanEntry) -> None:
    st.header(entry.name, divider="gray")
    if entry.plan is None:
        count = len(entry.problems)
        st.error(f"✗ {for_markdown(entry.shown)}: {count} problem{'s' if count != 1 else ''}")
        st.code("\n".join(entry.problems), language=None)
        return
    plan = entry.plan
    st.success(
        f"✓ {for_markdown(entry.shown)} is valid: {for_markdown(plan_summary.headline(plan))}"
    )
    if plan.description:
        st.markdown(plan.description.strip())
    st.markdown(f"**Next scheduled drill:** {_next_drill(settings, entry)}")
    st.markdown(f"**Last drill:** {_last_drill(settings, entry)}")
    sites, tiers, datasets, dns, objectives = st.tabs(
        ["Sites", "Tiers", "Datasets", "DNS", "Objectives"]
    )
    with sites:
        st.markdown(components.markdown_table(plan_summary.sites(plan)))
    with tiers:
        st.markdown(components.markdown_table(plan_summary.tiers(plan)))
    with datasets:
        rows = plan_summary.datasets(plan)
        st.markdown(components.markdown_table(rows) if rows else "No dataset.")
    with dns:
        st.markdown(components.markdown_table(plan_summary.dns(plan)))
    with objectives:
        st.markdown(components.markdown_table(plan_summary.objectives(plan)))


def main() -> None:
    settings = load_settings()
    st.title("Plans")
    entries = data.plans(settings)
    if not entries:
        st.info("No plan is configured: set `DRILLS_PLANS` to plan files or globs.")
        return
    st.caption(f"{len(entries)} plan file(s) from `DRILLS_PLANS` (or the defaults).")
    for entry in entries:
        _plan(settings, entry)


main()
