"""A run's preflight: what must hold before its first change, and the readiness it keeps.

In a drill or a practice the readiness checks run first, and a blocking failure stops
the run before any change (unless the operator accepted it). An incident cannot be
stopped by them: it runs them beside the takeover, in a thread, and keeps their result
as its readiness at T0. Every mode proves its two sites are two, and its fence.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from drills.checks.areas.identity import CHECK_ID as DISTINCT_CHECK
from drills.checks.areas.identity import distinct_result
from drills.checks.base import CheckRegistry
from drills.checks.checkup import check_context, select_checks
from drills.checks.readiness import run_readiness
from drills.checks.runner import ReadinessReport, run_checks
from drills.errors import DrillError
from drills.store.kinds import Mode
from drills.takeover import carry
from drills.takeover.after_switch import AfterSwitch
from drills.takeover.recorder import RunRecorder
from drills.takeover.request import DrillAborted
from drills.takeover.snapshot import Snapshot, take
from drills.takeover.steps.fence import preflight_guard
from drills.takeover.steps.phases import PhaseContext
from drills.takeover.timeline import PhaseRecord, StepRecord

log = logging.getLogger("drills.takeover.preflight")

# How long an incident waits, after its preflight, for the state before to be read.
INCIDENT_SNAPSHOT_WAIT_S = 5.0


class Preflight:
    """The preflight phase of one run, and the readiness report it leaves."""

    def __init__(
        self, recorder: RunRecorder, after_switch: AfterSwitch, checks: CheckRegistry | None
    ) -> None:
        self.recorder = recorder
        self.request = recorder.request
        self.after_switch = after_switch
        self.checks = checks  # the caller's registry; the guards always use drills' own
        self.readiness: ReadinessReport | None = None
        self._beside: threading.Thread | None = None

    def run(self, ctx: PhaseContext) -> None:
        """Two sites that are two, and a fence that can be proven (or is forced); in a
        drill or practice, the readiness checks before them."""
        guard: ReadinessReport | None
        with ctx.timeline.phase("preflight") as phase:
            if self.request.mode == Mode.INCIDENT and not self.request.dry_run:
                self._start_beside(ctx, phase)
                guard = self.distinct(ctx)
            else:
                with ctx.timeline.step("readiness checks") as step:
                    self._readiness(ctx, step)
                guard = self.readiness
                ctx.facts[carry.ROOM] = carry.room(self.readiness)
                if distinct_result(guard) is None:
                    # A registry without sites.distinct: drills' own check, as in an incident.
                    guard = self.distinct(ctx)
            preflight_guard(ctx, guard)
            if not self.request.dry_run:
                self.after_switch.baseline(ctx.targets, ctx.timeline)

    def incident_snapshot(self, ctx: PhaseContext) -> Snapshot:
        """The preflight of an incident, with its state before read beside it. The primary
        may be down: a snapshot that cannot be read in time is done without (the failback
        then goes back to the originals of the journal), never waited for."""
        pool = ThreadPoolExecutor(1, "snapshot-before")
        try:
            reading = pool.submit(contextvars.copy_context().run, take, ctx.plan, ctx.targets)
            self.run(ctx)
            try:
                return reading.result(timeout=INCIDENT_SNAPSHOT_WAIT_S)
            except (DrillError, TimeoutError) as exc:
                log.warning("run %s: no snapshot of the state before (%s)",
                            self.recorder.run_id, exc)  # fmt: skip
                return {}
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def distinct(self, ctx: PhaseContext) -> ReadinessReport:
        """sites.distinct alone, drills' own check whatever the caller gives: the guard."""
        context = check_context(ctx.plan, ctx.targets, None)
        return run_checks(select_checks([DISTINCT_CHECK]), context)

    def _readiness(self, ctx: PhaseContext, step: StepRecord) -> None:
        request = self.request
        self.readiness = run_readiness(
            ctx.plan, history=self.recorder.history, registry=self.checks
        )
        failing = [r.id for r in self.readiness.blocking]
        accepted = [i for i in failing if i in request.accept_blocking]
        blocking = [i for i in failing if i not in accepted]
        step.evidence = {"blocking": blocking, "checks": len(self.readiness.results)}
        if accepted:
            step.evidence["accepted"] = accepted
        if blocking and request.mode.rehearsal:
            step.result = f"blocked by {', '.join(blocking)}"
            raise DrillAborted(f"preflight: blocking readiness failures: {', '.join(blocking)}")
        if accepted:
            step.result = f"going on past {', '.join(accepted)} (accepted by the operator)"
            if not request.dry_run:  # a preview changes nothing: nothing to answer for
                self.recorder.audit_accepted(accepted)
        if blocking:
            step.result = f"recorded and continuing (incident): {', '.join(blocking)}"

    def _start_beside(self, ctx: PhaseContext, preflight: PhaseRecord) -> None:
        run_id = self.recorder.run_id

        def check() -> None:
            try:
                with ctx.timeline.step("readiness checks", phase=preflight) as step:
                    self._readiness(ctx, step)
                    step.evidence["beside_takeover"] = True
                assert self.readiness is not None
                self.recorder.update(readiness=self.readiness.to_json())
            except Exception:  # recorded in its step; an incident goes on without it
                log.error("run %s: readiness checks failed", run_id, exc_info=True)

        # The caller's context (a Prefect flow run's logger, say) goes with the thread.
        run = contextvars.copy_context().run
        self._beside = threading.Thread(
            target=run, args=(check,), name=f"readiness-{run_id}", daemon=True
        )
        self._beside.start()

    def await_beside(self, timeout_s: float) -> None:
        """Wait for the readiness checks an incident runs beside its takeover."""
        thread = self._beside
        if thread is None or not thread.is_alive():
            return
        thread.join(timeout_s)
        if thread.is_alive():
            log.error("run %s: readiness checks still running after %.0fs",
                      self.recorder.run_id, timeout_s)  # fmt: skip


__all__ = ["INCIDENT_SNAPSHOT_WAIT_S", "Preflight"]
