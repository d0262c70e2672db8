"""Readiness of every plan of a fleet at once: `drills readiness --all` and the flow's.

Plans run concurrently, at most ``concurrency`` at a time (each runs its checks
concurrently as it would alone), over one ``SharedTargets``: a cluster, registry or
bucket that several plans name is asked once per run. One result per plan file, in the
order given; a plan that does not load, or whose run fails, gets its error instead. The
snapshots are kept together at the end, in one transaction (and notified from there).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from drills.checks.base import CheckRegistry
from drills.checks.readiness import run_readiness, store_and_notify_all
from drills.checks.runner import CheckCall, ReadinessReport, call_in_place
from drills.errors import DrillError, PlanError
from drills.plan import DrillPlan, load_plan
from drills.store.history import HistoryStore
from drills.targets.shared import SharedTargets

log = logging.getLogger("drills.checks.fleet")

DEFAULT_CONCURRENCY = 8  # plans at once; each runs up to 8 checks at once


@dataclass(frozen=True)
class PlanReadiness:
    """One plan file's readiness in a fleet run: its report, or why there is none."""

    path: str
    plan: str  # the plan's name; the file's name when it does not load
    report: ReadinessReport | None
    error: str | None
    invalid: bool  # the plan file itself is invalid (exit 2 territory)
    seconds: float

    @property
    def ok(self) -> bool:
        return self.report is not None and self.report.ok

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "plan": self.plan,
            "ok": self.ok,
            "blocking": len(self.report.blocking) if self.report else None,
            "error": self.error,
            "seconds": round(self.seconds, 3),
            "report": self.report.to_json() if self.report else None,
        }


def _load(paths: Sequence[str]) -> list[tuple[str, DrillPlan | None, str | None]]:
    """Each path with its plan, or the reason it cannot run (invalid, or a name used twice)."""
    loaded: list[tuple[str, DrillPlan | None, str | None]] = []
    first_of: dict[str, str] = {}
    for path in paths:
        try:
            plan = load_plan(path)
        except PlanError as exc:
            loaded.append((path, None, f"invalid plan: {len(exc.problems)} problem(s); "
                                       f"see `drills plan validate {path}`"))  # fmt: skip
            continue
        if plan.name in first_of:
            loaded.append((path, None, f"plan name {plan.name} is also {first_of[plan.name]}'s"))
            continue
        first_of[plan.name] = path
        loaded.append((path, plan, None))
    return loaded


def run_readiness_all(
    paths: Sequence[str],
    *,
    history: HistoryStore | None,
    concurrency: int = DEFAULT_CONCURRENCY,
    registry: CheckRegistry | None = None,
    call: CheckCall = call_in_place,
    on_plan: Callable[[PlanReadiness], None] | None = None,
) -> list[PlanReadiness]:
    """Every plan's readiness, stored and notified as each would be alone."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    loaded = _load(paths)

    def one(path: str, plan: DrillPlan, shared: SharedTargets) -> PlanReadiness:
        started = time.perf_counter()
        try:
            report = run_readiness(
                plan, history=history, store=False, registry=registry, call=call, shared=shared
            )
            result = PlanReadiness(path, plan.name, report, None, False, 0.0)
        except DrillError as exc:  # the store, say: the checks' own errors are results
            log.warning("readiness of %s failed: %s", plan.name, exc)
            result = PlanReadiness(path, plan.name, None, str(exc), False, 0.0)
        return replace(result, seconds=time.perf_counter() - started)

    results: dict[int, PlanReadiness] = {}
    plans: dict[int, DrillPlan] = {}
    with SharedTargets() as shared, ThreadPoolExecutor(concurrency, "plan") as pool:
        futures = {}
        for index, (path, plan, error) in enumerate(loaded):
            if plan is None:
                results[index] = PlanReadiness(path, Path(path).name, None, error, True, 0.0)
            else:
                plans[index] = plan
                futures[index] = pool.submit(one, path, plan, shared)
        for index, future in futures.items():
            results[index] = future.result()
    if history is not None:
        _keep(history, plans, results)
    ordered = [results[i] for i in range(len(loaded))]
    if on_plan is not None:
        for result in ordered:
            on_plan(result)
    return ordered


def _keep(
    history: HistoryStore, plans: dict[int, DrillPlan], results: dict[int, PlanReadiness]
) -> None:
    """Every report's snapshot in one transaction; each result then carries its notices."""
    done = [(i, plans[i], report) for i in plans if (report := results[i].report) is not None]
    try:
        kept = store_and_notify_all(history, [(plan, report) for _, plan, report in done])
    except DrillError as exc:  # the store failed: every plan says so
        log.warning("readiness snapshots not kept: %s", exc)
        for i, _, _ in done:
            results[i] = replace(results[i], error=f"not kept: {exc}")
        return
    for (i, _, _), report in zip(done, kept, strict=True):
        results[i] = replace(results[i], report=report)
