"""What must hold once DNS points at DR: the plan's SLOs and its load probe.

A drill runs the load probe against the primary in its preflight (the baseline), starts
watching the SLOs as soon as the smoke probe passes, runs the same load against DR, and
fails (so rolls back) when an SLO breached or could not be verified while required, or the
load went over its limits. An incident only watches the SLOs, after its RTO is fixed: a
breach is reported and announced (``incident.slo_breach``), never rolled back, and no load
is put on a DR that is serving for real. A practice, which moves no users, runs the load
at DR (through its practice name, or at DR's endpoint) beside the SLOs marked
``in_practice``, and puts no load on the primary.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from typing import Any

from drills.errors import NotMet, StepFailed
from drills.notify.slo import announce_slo_breach
from drills.plan import DrillPlan, Slo
from drills.store.details import RunDetails
from drills.store.kinds import Mode
from drills.takeover.slo_watch import SloResult, unverified_all, watch
from drills.takeover.timeline import Timeline
from drills.targets.load_probe import LoadProbeError, LoadResult, run_load
from drills.targets.prometheus_api import prometheus_url
from drills.targets.sites import Targets

log = logging.getLogger("drills.takeover.after_switch")


def _patiently(future: Future[list[SloResult]]) -> list[SloResult]:
    """The watch's result, waited for in short slices: a cancel (an interrupt raised in
    this thread) stops the wait at once, not at the end of a 5-minute hold."""
    while True:
        try:
            return future.result(timeout=0.5)
        except FuturesTimeout:
            continue


class AfterSwitch:
    def __init__(self, plan: DrillPlan, mode: Mode, details: RunDetails, run_id: str) -> None:
        self.plan, self.mode, self.details, self.run_id = plan, mode, details, run_id
        self.stop = threading.Event()
        self._pool: ThreadPoolExecutor | None = None
        self._slos: Future[list[SloResult]] | None = None
        self._baseline: LoadResult | None = None
        self._watched_from = 0.0
        self.via: str | None = None  # a practice's way to DR, in place of the load URL's host

    @property
    def active(self) -> bool:
        return bool(self._watched or self._load)

    @property
    def _watched(self) -> tuple[Slo, ...]:
        if self.mode == Mode.PRACTICE:
            return tuple(s for s in self.plan.slo if s.in_practice)
        return tuple(self.plan.slo) if self.mode in (Mode.DRILL, Mode.INCIDENT) else ()

    @property
    def _load(self) -> bool:
        return self.plan.load is not None and self.mode.rehearsal

    # -- the preflight ----------------------------------------------------------------
    def baseline(self, targets: Targets, timeline: Timeline) -> None:
        """A drill's load against the primary, through the name, before any change."""
        if not self._load or self.mode != Mode.DRILL:
            return
        assert self.plan.load is not None
        with timeline.step("load probe: primary baseline") as step:
            try:
                self._baseline = run_load(self.plan.load, targets.dns, "primary")
            except LoadProbeError as exc:
                raise StepFailed("load probe: primary baseline", str(exc)) from None
            step.evidence = self._baseline.to_json()
            step.result = self._baseline.line()
            self.details.load = {"primary": self._baseline.to_json()}

    # -- after the switch -----------------------------------------------------------
    def start(self, t0: dt.datetime) -> None:
        """Start watching the SLOs (from T0's clock), beside the phases that follow."""
        watched = self._watched
        if not watched:
            return
        url = prometheus_url(self.plan)
        self._watched_from = time.monotonic()
        self._pool = ThreadPoolExecutor(1, f"slo-{self.run_id}")
        if url is None:
            why = "no Prometheus (cost.prometheus or DRILLS_PROMETHEUS_URL)"
            self._slos = self._pool.submit(unverified_all, watched, why)
            return
        rto = self.plan.objectives.rto
        run = contextvars.copy_context().run
        self._slos = self._pool.submit(
            run, watch, watched, url, t0, rto, self.stop,
            stop_on_failure=self.mode.rehearsal,
        )  # fmt: skip

    def finish(self, targets: Targets, timeline: Timeline) -> None:
        """The load against DR, the SLOs to their end; raises StepFailed in a drill that is
        not met, so it rolls back. An incident is told, never stopped."""
        problems: list[str] = []
        if self._load:
            problems += self._dr_load(targets, timeline)
        if self._slos is not None:
            problems += self._slo_results(timeline)
        if problems and self.mode.rehearsal:
            raise NotMet("after the switch", "; ".join(problems))

    def _dr_load(self, targets: Targets, timeline: Timeline) -> list[str]:
        assert self.plan.load is not None
        load: dict[str, Any] = dict(self.details.load or {})
        with timeline.step("load probe: DR") as step:
            try:
                dr = run_load(self.plan.load, targets.dns, "dr", self.via)
            except LoadProbeError as exc:
                step.status, step.result = "failed", str(exc)
                load["dr"] = {"error": str(exc)}
                self.details.load = load
                return [str(exc)]
            load["dr"] = dr.to_json()
            load["limits"] = {"p95_seconds": self.plan.load.p95,
                              "error_rate": self.plan.load.error_rate}  # fmt: skip
            load["overhead_seconds"] = round(
                dr.overhead_s + (self._baseline.overhead_s if self._baseline else 0.0), 3
            )
            self.details.load = load
            over = dr.problems(self.plan.load)
            step.evidence = load
            step.result = dr.line() + (f": over its limits ({', '.join(over)})" if over else "")
            if over:
                step.status = "failed"
        return [f"load probe at DR: {', '.join(over)}"] if over else []

    def _slo_results(self, timeline: Timeline) -> list[str]:
        assert self._slos is not None
        with timeline.step("SLOs hold") as step:
            results = _patiently(self._slos)
            self.details.slo = [r.to_json() for r in results]
            failing = [r for r in results if r.status != "held"]
            step.evidence = {
                "slo": self.details.slo,
                "watched_seconds": round(time.monotonic() - self._watched_from, 3),
            }
            step.result = "; ".join(r.line() for r in results)
            if any(r.fails_drill for r in results):
                step.status = "failed"
        if failing and self.mode == Mode.INCIDENT:
            announce_slo_breach(self.plan, self.run_id, [r.to_json() for r in failing])
        return [r.line() for r in results if r.fails_drill]

    def close(self) -> None:
        """Stop the watch (a run that stopped early), without waiting on it."""
        self.stop.set()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
