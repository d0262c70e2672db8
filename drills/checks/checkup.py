"""A plan's checks, run: which checks, the context they share, and the report they make.

Nothing here stores a snapshot or tells anyone: that is the readiness service's part
(:mod:`drills.checks.readiness`), which runs the checks through here. The way back's
readiness is never stored, so it is run from here alone.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
from collections.abc import Callable, Iterable

from drills.checks.base import CheckContext, CheckRegistry, CheckResult, CheckSpec, Placement
from drills.checks.catalog import load_checks, wayback_catalog
from drills.checks.runner import CheckCall, ReadinessReport, call_in_place, run_checks
from drills.plan import DrillPlan
from drills.store.history import HistoryStore
from drills.targets.shared import SharedTargets
from drills.targets.sites import Targets

# The readiness service's logger, as before the two parted: what operators filter on.
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


def check_plan(
    plan: DrillPlan,
    specs: Iterable[CheckSpec],
    *,
    history: HistoryStore | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    call: CheckCall = call_in_place,
    shared: SharedTargets | None = None,
    placement: Placement | None = None,
) -> ReadinessReport:
    """Run ``specs`` on ``plan``'s sites concurrently, each through ``call`` (see
    runner.CheckCall). ``shared``: the targets of a run over many plans (drills.checks.fleet)."""
    with Targets(plan, shared) as targets:
        context = check_context(plan, targets, history, placement=placement)
        return run_checks(specs, context, on_result=on_result, call=call)


def recheck(
    plan: DrillPlan,
    history: HistoryStore,
    before: ReadinessReport,
    ids: Iterable[str],
    *,
    registry: CheckRegistry | None = None,
) -> ReadinessReport | None:
    """``before`` with the checks ``ids`` asked again now, dated now; None when ``registry``
    (every check of drills by default) has none of them."""
    chosen = registry if registry is not None else load_checks()
    known = {spec.id for spec in chosen.all()}
    specs = [chosen.get(i) for i in ids if i in known]
    if not specs:
        return None
    with Targets(plan) as targets:
        fresh = run_checks(specs, check_context(plan, targets, history))
    again = {r.id: r for r in fresh.results}
    results = tuple(again.pop(r.id, r) for r in before.results) + tuple(again.values())
    return ReadinessReport(plan=plan.name, checked_at=fresh.checked_at, results=results)


def wayback_checks(registry: CheckRegistry | None = None) -> list[CheckSpec]:
    """The checks of the failback direction: the plan's own, asked of the reversed plan
    (from ``registry``, every check of drills by default), and the way back's own."""
    way_back = wayback_catalog()
    chosen = registry if registry is not None else load_checks()
    swapped = [chosen.get(i) for i in way_back.swapped if i in {s.id for s in chosen.all()}]
    return swapped + way_back.own.all()


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
    from drills.plan.reverse import reversed_plan

    way_back = wayback_catalog()
    specs = wayback_checks(registry)
    reverse = reversed_plan(plan)
    with Targets(reverse, reverse=True) as targets:
        context = check_context(reverse, targets, history)
        report = run_checks(specs, context, on_result=on_result, call=call)
    results = tuple(way_back.homeward(r) if r.id in way_back.swapped else r for r in report.results)
    log.info("way-back readiness of %s: %d blocking", plan.name, sum(r.blocking for r in results))
    return dataclasses.replace(report, plan=plan.name, results=results)
