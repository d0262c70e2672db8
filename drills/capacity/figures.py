"""A plan's DR figures for the metrics and the Fleet page: the report's headline numbers,
computed in the background at most every few minutes, so a scrape or a page never waits
on a cluster or Prometheus."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from drills.capacity.gather import gather_capacity, pricing_for
from drills.capacity.report import CapacityReport, build_report
from drills.errors import DrillError
from drills.plan import DrillPlan
from drills.targets.prometheus_api import prometheus_url
from drills.targets.sites import Targets

log = logging.getLogger("drills.capacity")

REFRESH_S = 300.0
WINDOW_S = 7 * 86400.0


@dataclass(frozen=True)
class DrFigures:
    plan: str
    reserved_gpus: int
    needed_minimum_gpus: int
    needed_target_gpus: int | None
    idle_ratio: float
    idle_source: str
    currency: str | None
    cost_per_hour: float | None  # None: a reserved GPU is on an unpriced node
    cost_per_month: float | None
    computed_at: float


def figures_of(report: CapacityReport, at: float) -> DrFigures:
    return DrFigures(
        plan=report.inputs.plan,
        reserved_gpus=report.totals()["reserved"],
        needed_minimum_gpus=report.inputs.needs.minimum,
        needed_target_gpus=report.inputs.needs.target,
        idle_ratio=report.idle_ratio,
        idle_source=report.idle_source,
        currency=report.currency,
        cost_per_hour=None if report.cost_per_hour is None else float(report.cost_per_hour),
        cost_per_month=None if report.cost_per_month is None else float(report.cost_per_month),
        computed_at=at,
    )


def compute(plan: DrillPlan) -> CapacityReport:
    """The plan's report as `drills capacity` makes it (DRILLS_PRICING and
    DRILLS_PROMETHEUS_URL as it reads them); DrillError when it cannot be made."""
    pricing, note = pricing_for(plan, os.environ.get("DRILLS_PRICING"))
    prometheus = prometheus_url(plan)
    with Targets(plan) as targets:
        inputs = gather_capacity(plan, targets, pricing=pricing, pricing_note=note,
                        prometheus=prometheus, window_s=WINDOW_S)  # fmt: skip
    return build_report(inputs)


class FiguresCache:
    """The latest figures of each plan with a ``cost`` section. ``get`` never blocks: it
    returns what is known and starts one background refresh of the stale plans."""

    def __init__(
        self,
        refresh_s: float = REFRESH_S,
        make: Callable[[DrillPlan], CapacityReport] = compute,
    ) -> None:
        self.refresh_s = refresh_s
        self._make = make
        self._known: dict[str, DrFigures] = {}
        self._tried: dict[str, float] = {}
        self._lock = threading.Lock()
        self._running: threading.Thread | None = None

    def get(self, plans: Iterable[DrillPlan]) -> dict[str, DrFigures]:
        costed = [p for p in plans if p.cost is not None]
        now = time.time()
        with self._lock:
            stale = [p for p in costed if now - self._tried.get(p.name, 0.0) >= self.refresh_s]
            if stale and (self._running is None or not self._running.is_alive()):
                for p in stale:
                    self._tried[p.name] = now
                self._running = threading.Thread(
                    target=self._refresh, args=(stale,), name="dr-figures", daemon=True
                )
                self._running.start()
            names = {p.name for p in costed}
            return {name: f for name, f in self._known.items() if name in names}

    def wait(self, timeout: float) -> None:
        """Until the refresh under way ends (tests, and a first page that can wait)."""
        running = self._running
        if running is not None:
            running.join(timeout)

    def _refresh(self, plans: list[DrillPlan]) -> None:
        for plan in plans:
            try:
                figures = figures_of(self._make(plan), time.time())
            except DrillError as exc:
                log.warning("DR figures of %s: %s", plan.name, exc)
                with self._lock:
                    self._known.pop(plan.name, None)  # an old figure would look current
                continue
            with self._lock:
                self._known[plan.name] = figures
