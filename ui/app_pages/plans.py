"""Plans: is each plan valid, what does it cover, and when does it next run?"""

from __future__ import annotations

import streamlit as st

from drills.evidence import Coverage, PlanCoverage
from drills.orchestrator import deployment_schedules, describe_schedule
from drills.store import Mode
from drills.text import for_markdown
from ui import components, data, launches, plan_summary
from ui.data import PlanEntry
from ui.settings import UISettings, load_settings

KEY = "plans"


def _next_drill(settings: UISettings, entry: PlanEntry) -> str:
    """When the plan is next drilled. The schedule shown is the plan's `schedule:`, the one
    source `drills serve` deploys; a deployment that runs another one is called out."""
    assert entry.plan is not None
    in_plan = entry.plan.schedule
    planned = (
        f"plan schedule `{in_plan.cron}` ({in_plan.timezone})"
        if in_plan
        else "the plan has no `schedule:`"
    )
    state = launches.prefect_state(settings)
    if not state.usable or settings.prefect_api_url is None:
        return f"unknown: {state.problem}; {planned}"
    info = launches.deployment(
        settings.prefect_api_url, settings.drill_deployment, entry.path, entry.name
    )
    if info is None:
        return f"no `{settings.drill_deployment}` deployment on Prefect; {planned}"
    expected = tuple(describe_schedule(s) for s in deployment_schedules(entry.plan))
    if info.schedules != expected:
        carried = "; ".join(info.schedules) or "no schedule"
        planned += (
            f" — **the `{settings.drill_deployment}` deployment runs {carried} instead**: "
            "run `drills serve` again to deploy the plan's schedule"
        )
    if info.next_run is not None:
        return f"**{components.when(info.next_run)}** ({planned})"
    return f"none scheduled for this plan ({planned})"


def _last_drill(settings: UISettings, entry: PlanEntry) -> str:
    run = data.last_run(settings.db_url, entry.name, Mode.DRILL)
    if run is None:
        return "never drilled"
    return (
        f"{components.when(run.started_at)} — **{components.verdict_label(run.verdict)}**, "
        f"RTO {components.versus(run.rto_seconds, run.rto_target)} (run `{run.id}`)"
    )


def _coverage_line(row: PlanCoverage | None, period: str) -> str:
    if row is None:
        return "no run in the history"
    drilled = "drilled" if row.drilled else "**NOT drilled**"
    failback = "failback drilled" if row.failback_drilled else "failback **not** drilled"
    last = components.when(row.last_drill) if row.last_drill else "never"
    return (
        f"{drilled} in the last {period} (last "
        f"successful drill: {last}); {failback}; {row.incidents} incident(s); "
        f"{row.open_findings} open finding(s); history {row.chain}"
    )


def _findings(settings: UISettings, entry: PlanEntry) -> None:
    found = data.plan_open_findings(settings.db_url, entry.name)
    if not found:
        return
    # A Markdown table, not a dataframe: a dataframe cuts the remediation, the one cell
    # the reader needs whole, to its column's width.
    with st.expander(f"Open findings ({len(found)})", expanded=True):
        st.markdown(components.markdown_table([
            {"finding": f.id, "kind": f.kind, "what": f.key, "detail": f.detail,
             "remediation": f.remediation, "since run": f.opened_run, "seen": f.times_seen}
            for f in found
        ]))  # fmt: skip


def _plan(settings: UISettings, entry: PlanEntry, cover: Coverage) -> None:
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
    row = next((p for p in cover.plans if p.plan == entry.name), None)
    st.markdown(f"**Coverage:** {_coverage_line(row, cover.period)}")
    _findings(settings, entry)
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
    names = tuple(sorted({e.name for e in entries if e.valid}))
    verify = st.session_state.get(f"{KEY}.verify", False)
    cover = data.plan_coverage(settings.db_url, names, bool(verify))
    _history_verdict(cover)
    if len(entries) > components.MAX_TABS:
        chosen = components.plan_picker(f"{KEY}.plan", [e.name for e in entries])
        entries = [e for e in entries if e.name == chosen]
    for entry in entries:
        _plan(settings, entry, cover)


def _history_verdict(cover: Coverage) -> None:
    st.markdown(f"**{for_markdown(cover.headline())}**")
    st.toggle("Verify the history chain (reads every record)", key=f"{KEY}.verify")
    if not cover.chain.checked:
        return
    if cover.chain.verifies:
        st.success(f"History verifies: {for_markdown(cover.chain.detail)}", icon="✅")
    else:
        st.error(f"History does NOT verify: {for_markdown(cover.chain.detail)}", icon="🚨")


main()
