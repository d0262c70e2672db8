"""Everything the pages read or do, behind Streamlit's cache, but the Prefect server (what
the pages read of it and start there is in ui/launches.py).

Pages call only these and ui/launches.py. Loaders take plain values (URLs, names, page
numbers) so the cache keys on them; each has a short TTL, and every action that changes
what they read clears them.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import streamlit as st

from drills.capacity import FiguresCache, busy_over_time
from drills.capacity import compute as compute_capacity
from drills.checks import CheckResult, ReadinessReport, run_readiness, run_wayback, select_checks
from drills.errors import DrillError, PlanError, TargetError
from drills.evidence import (
    Coverage,
    Finding,
    Period,
    SigningKeyError,
    build,
    chain_not_checked,
    chain_status,
    chromium_problem,
    configured_reference,
    configured_sign,
    coverage_over,
    history_version,
    load_signer,
    open_counts,
    open_findings,
    zip_bytes,
)
from drills.orchestrator import REFUSAL_ACTION, gather
from drills.plan import DrillPlan, load_plan
from drills.store import (
    HistoryStore,
    Mode,
    RecordedServing,
    RunStatus,
    Site,
    fleet_facts,
    recorded_serving_of,
    render_markdown,
    report_data,
)
from drills.takeover import DECLARE_ACTION, FAILBACK_ACTION, PROPOSAL_ACTIONS
from drills.targets import prometheus_url
from ui import queries
from ui.fleet import (
    Blocked,
    FleetRow,
    Window,
    blocked_windows,
    calendar,
    fleet_row,
    invalid_row,
    planned_drills,
    sort_rows,
)
from ui.fleet_apps import ApplicationRow, application_rows
from ui.queries import AuditRow, RtoPoint, RunRow
from ui.settings import UISettings

log = logging.getLogger("drills.ui.data")

PAGE_SIZE = 25
CANCEL_ACTION = "cancel-run"
READINESS_ACTION = "run-readiness"
WAYBACK_ACTION = "check-way-back"
EVIDENCE_ACTION = "export-evidence"
SIGN_IN_ACTION = "sign-in"
# What the incident page's audit log lists: every action the dashboard audits.
AUDITED_ACTIONS = (DECLARE_ACTION, FAILBACK_ACTION, CANCEL_ACTION, READINESS_ACTION,
                   WAYBACK_ACTION, EVIDENCE_ACTION, SIGN_IN_ACTION,
                   *PROPOSAL_ACTIONS, REFUSAL_ACTION)  # fmt: skip
SHORT = dt.timedelta(seconds=5)
MEDIUM = dt.timedelta(seconds=15)


@dataclass(frozen=True)
class PlanEntry:
    shown: str  # the path as configured, for people
    name: str  # the plan's name; the file's name when it does not load
    plan: DrillPlan | None
    problems: tuple[str, ...]  # as `drills plan validate` prints them

    @property
    def path(self) -> str:
        """Absolute: what a flow run, started elsewhere, is given."""
        return str(Path(self.shown).resolve())

    @property
    def valid(self) -> bool:
        return self.plan is not None


@st.cache_resource(show_spinner=False)
def _store(db_url: str) -> HistoryStore:
    # One engine per URL for the whole server: opening one per rerun costs more than a query.
    try:
        sign = configured_sign()  # the checkpoints of readiness re-run from here, signed
    except SigningKeyError as exc:  # named where a pack is asked for; unsigned meanwhile
        log.warning("checkpoints kept unsigned: %s", exc)
        sign = None
    return HistoryStore(db_url, sign=sign)


def store(settings: UISettings) -> HistoryStore:
    return _store(settings.db_url)


def clear_caches() -> None:
    st.cache_data.clear()


# --- plans ----------------------------------------------------------------------


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


@st.cache_resource(show_spinner=False, max_entries=2000)
def _plan_entry(path: str, _mtime_ns: int) -> PlanEntry:
    # One parse per file and change for the whole server: a fleet's 200 plans take
    # seconds to validate, and no page view should pay that again.
    try:
        plan = load_plan(path)
    except PlanError as exc:
        return PlanEntry(path, os.path.basename(path), None, tuple(str(p) for p in exc.problems))
    return PlanEntry(path, plan.name, plan, ())


@st.cache_resource(show_spinner=False, max_entries=8)
def _plans(paths_and_mtimes: tuple[tuple[str, int], ...]) -> list[PlanEntry]:
    # A resource, not data: 200 validated plans pickled and unpickled on every page view
    # cost more than the page. Nobody changes an entry; a changed file is a new key.
    return [_plan_entry(path, mtime) for path, mtime in paths_and_mtimes]


def plans(settings: UISettings) -> list[PlanEntry]:
    """The configured plans, validated; reloaded when a file changes."""
    return _plans(tuple((p, _mtime(p)) for p in settings.plan_paths))


# --- readiness --------------------------------------------------------------------


@st.cache_data(ttl=SHORT, show_spinner=False)
def latest_readiness(db_url: str, plan_name: str) -> ReadinessReport | None:
    snapshot = _store(db_url).latest_readiness(plan_name)
    return ReadinessReport.from_json(snapshot.report) if snapshot else None


def check_count() -> int:
    return len(select_checks())


def run_readiness_inline(
    settings: UISettings, entry: PlanEntry, on_result: Callable[[CheckResult], None]
) -> ReadinessReport:
    """Run every check here and now, keeping the snapshot (no Prefect needed)."""
    assert entry.plan is not None
    try:
        return run_readiness(
            entry.plan, history=store(settings), on_result=on_result, placement=gather("dashboard")
        )
    finally:
        clear_caches()


# --- fleet ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Fleet:
    rows: list[FleetRow]  # problems first
    windows: list[Window]  # the drills planned in the coming weeks
    blocked: list[Blocked] = field(default_factory=list)  # change freezes in those weeks
    applications: list[ApplicationRow] = field(default_factory=list)  # each one's last drill


@st.cache_resource(show_spinner=False, max_entries=4, ttl=dt.timedelta(minutes=1))
def _open_counts(
    db_url: str, plans: tuple[str, ...], version: tuple[object, ...]
) -> dict[str, int]:
    # Exact, so read from every run: once per history change (a run added or ended) for
    # the whole server, not once per view; a minute at most for a running run's steps.
    return open_counts(_store(db_url), plans)


@st.cache_resource(show_spinner=False)
def _dr_figures() -> FiguresCache:
    # One for the server: each plan's DR pool is read in the background every few minutes,
    # never while a page waits.
    return FiguresCache()


def capacity_report(path: str) -> dict[str, Any]:
    """`drills capacity PATH --json`'s report, or {"error": why} when it cannot be made, with
    ``_gpu_nodes`` and ``_prometheus`` for the chart; kept 5 minutes, as the DR figures are
    (reading a DR pool and Prometheus takes seconds)."""
    return _capacity_report(path, _mtime(path))


@st.cache_data(ttl=dt.timedelta(minutes=5), show_spinner=False)
def _capacity_report(path: str, _mtime_ns: int) -> dict[str, Any]:
    try:
        plan = load_plan(path)
        report = compute_capacity(plan)
    except DrillError as exc:
        return {"error": str(exc).splitlines()[0]}
    nodes = [n.name for n in report.inputs.nodes]
    url = prometheus_url(plan)
    return {**report.to_json(), "_gpu_nodes": nodes, "_prometheus": url}


@st.cache_data(ttl=dt.timedelta(minutes=1), show_spinner=False)
def gpus_busy(url: str, nodes: tuple[str, ...], window_s: float) -> list[tuple[float, float]] | str:
    """GPUs busy at DR over the window (DCGM in Prometheus), or why they could not be read."""
    try:
        return busy_over_time(url, nodes, window_s)
    except TargetError as exc:
        return str(exc)


@st.cache_data(ttl=SHORT, show_spinner=False)
def _fleet(db_url: str, paths_and_mtimes: tuple[tuple[str, int], ...], minute: int) -> Fleet:
    now = dt.datetime.fromtimestamp(minute * 60, dt.UTC)
    entries = _plans(paths_and_mtimes)
    valid = [e.plan for e in entries if e.plan is not None]
    facts = fleet_facts(_store(db_url), [p.name for p in valid])
    counts = _open_counts(db_url, tuple(facts), history_version(_store(db_url)))
    for name, count in counts.items():
        facts[name].open_findings = count
    rows = [invalid_row(e.name, len(e.problems)) for e in entries if e.plan is None]
    lengths, planned = {}, {}
    dr = _dr_figures().get(valid)
    for plan in valid:
        planned[plan.name] = times = planned_drills(plan, now)
        first = times[0] if times else None
        rows.append(fleet_row(plan, facts[plan.name], first, now, dr.get(plan.name)))
        drill = facts[plan.name].last_drill
        if drill and drill.finished_at:
            lengths[plan.name] = drill.finished_at - drill.started_at
    blocked = [b for plan in valid for b in blocked_windows(plan, now)]
    apps = application_rows(_store(db_url), valid)
    return Fleet(sort_rows(rows), calendar(valid, planned, lengths), blocked, apps)


def fleet(settings: UISettings) -> Fleet:
    """Every plan's row and the drills calendar; recomputed at most every few seconds."""
    minute = int(dt.datetime.now(dt.UTC).timestamp() // 60)
    return _fleet(settings.db_url, tuple((p, _mtime(p)) for p in settings.plan_paths), minute)


# --- history ------------------------------------------------------------------------


@st.cache_data(ttl=SHORT, show_spinner=False)
def runs_page(
    db_url: str, plan: str | None, mode: str | None, verdict: str | None, page: int
) -> tuple[list[RunRow], bool]:
    return queries.runs_page(
        _store(db_url), plan=plan, mode=mode, verdict=verdict, page=page, size=PAGE_SIZE
    )


@st.cache_data(ttl=SHORT, show_spinner=False)
def rto_points(db_url: str, plan: str | None, mode: str | None) -> list[RtoPoint]:
    return queries.rto_points(_store(db_url), plan=plan, mode=mode)


@st.cache_data(ttl=MEDIUM, show_spinner=False)
def plans_in_history(db_url: str) -> list[str]:
    return queries.run_plans(_store(db_url))


@st.cache_data(ttl=SHORT, show_spinner=False)
def run_report(db_url: str, run_id: str) -> dict[str, Any] | None:
    """The run's report data: exactly what `drills report --format json` prints."""
    store_ = _store(db_url)
    run = store_.get_run(run_id)
    return report_data(run, store_) if run is not None else None


def report_markdown(data: dict[str, Any]) -> str:
    """The Markdown `drills report` prints, from the same data."""
    return render_markdown(data)


def readiness_snapshot(report: dict[str, Any]) -> ReadinessReport | None:
    """The readiness a run recorded at T0, as a report the checklist can draw."""
    snapshot = report.get("readiness") or {}
    return ReadinessReport.from_json(snapshot) if snapshot.get("results") else None


@st.cache_data(ttl=SHORT, show_spinner=False)
def last_run(db_url: str, plan_name: str, mode: str | None = None) -> RunRow | None:
    return queries.last_run(_store(db_url), plan_name, mode)


def live_run(
    settings: UISettings,
    flow_run_id: str,
    plan_name: str,
    declared_at: dt.datetime | None,
    mode: str = Mode.INCIDENT,
) -> RunRow | None:
    """Not cached: the live view polls it."""
    return queries.run_for_flow_run(store(settings), flow_run_id, plan_name, declared_at, mode)


def runs_going(settings: UISettings, plan_names: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(plan, mode)`` of each run of these plans going now (dry runs aside): not cached,
    a form must not offer to start another once one is going. A run stopped part-way and
    held for ``drills recover`` is not going: the form stays, and its refusal says what to
    decide."""
    going = []
    for plan in plan_names:
        going += [(plan, str(r.mode)) for r in store(settings).unfinished_runs(plan)
                  if not r.dry_run and r.status == RunStatus.RUNNING]  # fmt: skip
    return going


def live_report(settings: UISettings, run_id: str) -> dict[str, Any] | None:
    run = store(settings).get_run(run_id)
    return report_data(run, store(settings)) if run is not None else None


@st.cache_data(ttl=SHORT, show_spinner=False)
def declarations(db_url: str) -> list[AuditRow]:
    """What was done or asked from the dashboard, accepted or refused, newest first:
    incidents declared, failbacks, cancels, checks run, evidence exported, sign-ins."""
    return queries.recent_audit(_store(db_url), AUDITED_ACTIONS)


# --- where plans serve from ------------------------------------------------------------


@st.cache_data(ttl=SHORT, show_spinner=False)
def serving_from_dr(db_url: str) -> list[tuple[str, RecordedServing]]:
    """Every plan of the history that serves from DR now, by the history alone: cheap
    enough for every page's banner (no DNS read, no probe)."""
    serving = recorded_serving_of(_store(db_url), queries.run_plans(_store(db_url)))
    return [(plan, recorded) for plan, recorded in serving.items() if recorded.site == Site.DR]


WAYBACK_TTL = dt.timedelta(seconds=60)


@st.cache_data(ttl=WAYBACK_TTL, show_spinner="Checking the way back…")
def _wayback(db_url: str, plan_path: str, _mtime_ns: int, _who: str) -> ReadinessReport:
    # Live checks of both sites: kept a minute, not run again on every rerun. Audited
    # here, where they really run, under the name of whoever's view ran them.
    plan = load_plan(plan_path)
    _store(db_url).audit(
        who=_who, action=WAYBACK_ACTION, plan=plan.name, accepted=True,
        reason="checking the way back from the dashboard",
        detail={"outcome": "checked live against both sites"},
    )  # fmt: skip
    return run_wayback(plan, history=_store(db_url))


def wayback(settings: UISettings, entry: PlanEntry, who: str) -> ReadinessReport:
    """The way-back readiness of a plan (DR → primary), run live, kept a minute; only for
    the operator role, whose name ``who`` is."""
    return _wayback(settings.db_url, entry.path, _mtime(entry.path), who)


def recheck_wayback() -> None:
    _wayback.clear()


# --- evidence ------------------------------------------------------------------------------

COVERAGE_PERIOD = "12m"


@st.cache_data(ttl=MEDIUM, show_spinner=False)
def plan_coverage(db_url: str, plan_names: tuple[str, ...], verify: bool) -> Coverage:
    """Coverage over the last 12 months; with the history chain's verdict when ``verify``
    (it reads every record of the store: asked for, not on every view)."""
    chain = chain_status if verify else chain_not_checked
    return coverage_over(_store(db_url), plan_names, Period.parse(COVERAGE_PERIOD), chain=chain)


@st.cache_data(ttl=SHORT, show_spinner=False)
def plan_open_findings(db_url: str, plan_name: str) -> list[Finding]:
    return open_findings(_store(db_url), plan_name)


def signing_key() -> tuple[str | None, str | None]:
    """(key id, problem) of the key DRILLS_SIGNING_KEY references; (None, None) without one.
    The key itself never leaves this function."""
    try:
        signer = load_signer(configured_reference())
    except SigningKeyError as exc:
        return None, str(exc)
    return (signer.keyid if signer else None), None


def pack_problem() -> str | None:
    """Why no evidence pack can be made here (no Chromium for its PDF), or None."""
    return chromium_problem()


def evidence_pack(store: HistoryStore, run_id: str) -> bytes:
    """The run's evidence pack as a zip, signed when a key is configured. Not cached: a pack
    is made when asked for. Called by the download button on click, outside the page's
    script run: it uses no Streamlit call."""
    run = store.get_run(run_id)
    if run is None:
        raise KeyError(run_id)
    return zip_bytes(build(store, run, load_signer(configured_reference())))


def exported_pack(store: HistoryStore, run_id: str, who: str) -> bytes:
    """The evidence pack the button hands to ``who`` (an operator), audited as exported."""
    run = store.get_run(run_id)
    store.audit(
        who=who, action=EVIDENCE_ACTION, plan=run.plan if run else "", accepted=True,
        reason="evidence pack downloaded from the dashboard",
        detail={"outcome": f"exported the evidence pack of run {run_id}", "run_id": run_id},
    )  # fmt: skip
    return evidence_pack(store, run_id)
