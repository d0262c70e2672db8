"""Run a plan's readiness checks and keep the snapshot: the one entry point for the
CLI, the Prefect flow, the drill's preflight and the dashboard."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
from collections.abc import Callable, Iterable, Sequence

from drills.checks.base import (
    CheckContext,
    CheckRegistry,
    CheckResult,
    CheckSpec,
    Placement,
)
from drills.checks.catalog import load_checks
from drills.checks.runner import CheckCall, ReadinessReport, call_in_place, run_checks
from drills.notify import notify, readiness_changes, remind_after
from drills.notify.readiness import FAILING_SINCE
from drills.plan import DrillPlan
from drills.store.history import HistoryStore
from drills.targets.shared import SharedTargets
from drills.targets.sites import Targets

log = logging.getLogger("drills.checks.readiness")


def select_checks(
    only: Iterable[str] = (),
    categories: Iterable[str] = (),
    registry: CheckRegistry | None = None,
) -> list[CheckSpec]:
    """The checks asked for, from ``registry`` (every check of drills by default)."""
    return (registry if registry is not None else load_checks()).select(only, categories)


def check_context(
    plan: DrillPlan,
    targets: Targets,
    history: HistoryStore | None,
    *,
    now: dt.datetime | None = None,
    fingerprint_key: bytes | None = None,
    placement: Placement | None = None,
) -> CheckContext:
    return CheckContext(
        plan=plan,
        targets=targets,
        history=history,
        now=now or dt.datetime.now(dt.UTC),
        # A fresh key per run: fingerprints can be compared within a run, never across.
        fingerprint_key=fingerprint_key or os.urandom(32),
        placement=placement,
    )


def run_readiness(
    plan: DrillPlan,
    *,
    history: HistoryStore | None = None,
    only: Iterable[str] = (),
    categories: Iterable[str] = (),
    store: bool = True,
    on_result: Callable[[CheckResult], None] | None = None,
    registry: CheckRegistry | None = None,
    call: CheckCall = call_in_place,
    shared: SharedTargets | None = None,
    placement: Placement | None = None,
) -> ReadinessReport:
    """Run the selected checks concurrently, each through ``call`` (see runner.CheckCall).

    The snapshot is stored when a history store is given and every check ran: a
    partial run (``only``/``categories``, or one application's) must not pass for the
    plan's readiness.
    ``shared``: the targets of a run over many plans (drills.checks.fleet).
    """
    specs = select_checks(only, categories, registry)
    with Targets(plan, shared) as targets:
        context = check_context(plan, targets, history, placement=placement)
        report = run_checks(specs, context, on_result=on_result, call=call)
    # One application's checks (a view of the plan) are not the plan's readiness either.
    whole = plan.application is None
    if history is not None and store and whole and not specs_filtered(only, categories):
        report = _store_and_notify(plan, history, report)
    log.info(
        "readiness of %s: %d checks, %d blocking",
        plan.name,
        len(report.results),
        len(report.blocking),
    )
    return report


# The checks whose answer a run's own record changes: the last successful drill, and
# the forecast, which learns from each run's measured phases.
AFTER_A_RUN = ("drill.cadence", "forecast.rto")


def refresh_after_run(
    plan: DrillPlan,
    history: HistoryStore,
    before: ReadinessReport,
    *,
    registry: CheckRegistry | None = None,
) -> ReadinessReport:
    """``before`` (the run's preflight) with the checks in :data:`AFTER_A_RUN` asked again
    now that the run is recorded, stored as the plan's latest snapshot: after a drill the
    views read "drilled" where the history says so, never the preflight's "never drilled".

    The other results are the preflight's, minutes old: the snapshot is as fresh as the
    run, which is what every view's "checked ... ago" means by it."""
    chosen = registry if registry is not None else load_checks()
    known = {spec.id for spec in chosen.all()}
    specs = [chosen.get(i) for i in AFTER_A_RUN if i in known]
    if not specs:
        return before
    with Targets(plan) as targets:
        fresh = run_checks(specs, check_context(plan, targets, history))
    again = {r.id: r for r in fresh.results}
    results = tuple(again.pop(r.id, r) for r in before.results) + tuple(again.values())
    report = ReadinessReport(plan=plan.name, checked_at=fresh.checked_at, results=results)
    return _store_and_notify(plan, history, report)


def wayback_checks(registry: CheckRegistry | None = None) -> list[CheckSpec]:
    """The checks of the failback direction: the plan's own, asked of the reversed plan
    (from ``registry``, every check of drills by default), and the way back's own."""
    from drills.checks.areas.wayback import SWAPPED, WAYBACK

    chosen = registry if registry is not None else load_checks()
    swapped = [chosen.get(i) for i in SWAPPED if i in {s.id for s in chosen.all()}]
    return swapped + WAYBACK.all()


def run_wayback(
    plan: DrillPlan,
    *,
    history: HistoryStore | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    registry: CheckRegistry | None = None,
    call: CheckCall = call_in_place,
) -> ReadinessReport:
    """Readiness for the way back (DR → primary), never stored as the plan's readiness.

    The checks run on the reversed plan, with each site named for what it really is in
    errors, and the results are titled for the failback direction.
    """
    from drills.checks.areas.wayback import SWAPPED, TITLES, homeward
    from drills.plan.reverse import reversed_plan

    specs = wayback_checks(registry)
    reverse = reversed_plan(plan)
    with Targets(reverse, reverse=True) as targets:
        context = check_context(reverse, targets, history)
        report = run_checks(specs, context, on_result=on_result, call=call)
    results = tuple(
        dataclasses.replace(r, title=TITLES[r.id], summary=homeward(r.summary),
                            remediation=homeward(r.remediation) if r.remediation else r.remediation)
        if r.id in SWAPPED else r
        for r in report.results
    )  # fmt: skip
    log.info("way-back readiness of %s: %d blocking", plan.name, sum(r.blocking for r in results))
    return dataclasses.replace(report, plan=plan.name, results=results)


def _store_and_notify(
    plan: DrillPlan, history: HistoryStore, report: ReadinessReport
) -> ReadinessReport:
    return store_and_notify_all(history, [(plan, report)])[0]


def store_and_notify_all(
    history: HistoryStore, done: Sequence[tuple[DrillPlan, ReadinessReport]]
) -> list[ReadinessReport]:
    """Keep each plan's snapshot, all in one transaction, and tell people what changed
    since each plan's previous one.

    Only full, stored runs notify: "changed" means against the last stored snapshot.
    """
    previous = history.latest_readiness_of([plan.name for plan, _ in done])
    rows, changed = [], []
    for plan, report in done:
        before = previous.get(plan.name)
        data = report.to_json()
        changes = readiness_changes(
            plan.name, before.report if before else None, data, remind_after=remind_after()
        )
        data[FAILING_SINCE] = changes.failing_since
        rows.append((plan.name, report.checked_at, report.ok, len(report.blocking), data))
        changed.append(changes)
    history.save_readiness_many(rows)
    return [
        dataclasses.replace(
            report, notices=changes.notices, deliveries=notify(changes.notices, plan)
        )
        for (plan, report), changes in zip(done, changed, strict=True)
    ]


def specs_filtered(only: Iterable[str], categories: Iterable[str]) -> bool:
    return bool(list(only) or list(categories))
