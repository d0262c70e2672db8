"""The readiness service: run a plan's checks (:mod:`drills.checks.checkup`), keep the
snapshot and tell people what changed. The one entry point for the CLI, the Prefect
flow, the drill's preflight and the dashboard; the checks themselves only return results."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence

from drills.checks.base import CheckRegistry, CheckResult, Placement
from drills.checks.checkup import check_plan, recheck, select_checks
from drills.checks.runner import CheckCall, ReadinessReport, call_in_place
from drills.notify import notify, readiness_changes, remind_after
from drills.notify.readiness import FAILING_SINCE
from drills.plan import DrillPlan
from drills.store.history import HistoryStore
from drills.targets.shared import SharedTargets

log = logging.getLogger("drills.checks.readiness")


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
    report = check_plan(
        plan,
        specs,
        history=history,
        on_result=on_result,
        call=call,
        shared=shared,
        placement=placement,
    )
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
    report = recheck(plan, history, before, AFTER_A_RUN, registry=registry)
    if report is None:
        return before
    return _store_and_notify(plan, history, report)


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
