"""How a run ends when it stops short: the rollback and its proof, an incident held
where it stopped, and the result each gives.

A drill or a practice that fails or is cancelled rolls back to the exact state it
started from, verified against its snapshot. An incident never fails back on its own:
it stops, and says what the operator may do.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import Any

from drills.errors import DrillError, NotMet
from drills.store.kinds import Mode, RunStatus, Verdict
from drills.takeover.measure import Measurement
from drills.takeover.recorder import RunRecorder
from drills.takeover.request import DrillResult
from drills.takeover.snapshot import Snapshot, differences, take
from drills.takeover.steps.executor import PlannedChange
from drills.takeover.steps.phases import PhaseContext, persist
from drills.takeover.steps.rollback import safe_rollback
from drills.takeover.stuck import continue_command, hold_stuck, transient
from drills.takeover.timeline import Timeline
from drills.takeover.write_ahead import WriteAheadJournal

log = logging.getLogger("drills.takeover.ending")

# How long the state after a failback or rollback may take to be read, its targets retried.
VERIFY_DEADLINE_S = 60.0
_NO_DRIFT: dict[str, Any] = {}
# A run that stopped short of a measurement: why it did, as its verdict.
_STOPPED_VERDICTS = {RunStatus.ABORTED: Verdict.ABORTED, RunStatus.CANCELLED: Verdict.CANCELLED}


def left_part_way(result: DrillResult, mode: Mode, journal: WriteAheadJournal) -> bool:
    """A run that left production other than it should: an incident that stopped
    (cancelled, failed) after changing something, or a drill whose rollback failed or
    whose journal still has changes to undo.

    Its run stays unfinished, like a crashed one: nothing new may start on the plan
    until `drills recover RUN` rolls the drill back, or an operator decides on the
    incident with `--complete` or `--hold`.
    """
    if result.status == RunStatus.ROLLBACK_FAILED:
        return True
    if mode.rehearsal:
        return bool(journal.to_undo())
    return result.status != RunStatus.SUCCEEDED and bool(journal.to_undo())


class RunEnding:
    """The results of one run, and its ways of stopping short."""

    def __init__(self, recorder: RunRecorder, timeline: Timeline) -> None:
        self.recorder = recorder
        self.request = recorder.request
        self.run_id = recorder.run_id
        self.timeline = timeline
        self.stopping: str | None = None  # why the run is undoing itself, once it is
        self.not_met = False  # DR answered but did not prove it carries: the verdict says so

    def result(
        self,
        status: RunStatus,
        measurement: Measurement | None,
        *,
        planned: list[PlannedChange] | None = None,
        drift: dict[str, Any] | None = _NO_DRIFT,
        error: str | None = None,
    ) -> DrillResult:
        verdict = measurement.verdict if measurement else None
        if not status.succeeded:
            stopped = Verdict.NOT_MET if self.not_met else Verdict.FAILED
            verdict = _STOPPED_VERDICTS.get(status, stopped)
        return DrillResult(
            self.run_id, status, verdict, measurement, self.timeline, planned or [],
            None if drift is None else dict(drift), error,
        )  # fmt: skip

    def failed(self, ctx: PhaseContext, before: Snapshot, exc: Exception) -> DrillResult:
        """Whatever went wrong, even a bug of ours, must not leave production half failed
        over: a drill rolls back first, and the cause goes with the result."""
        error = f"{type(exc).__name__}: {exc}" if not isinstance(exc, DrillError) else str(exc)
        self.not_met = isinstance(exc, NotMet)
        self.recorder.details.capacity = ctx.facts.get("capacity")  # measured before it stopped
        log.error("run %s failed: %s", self.run_id, error, exc_info=not isinstance(exc, DrillError))
        if not self.request.mode.rehearsal:
            return self.incident_stopped(RunStatus.FAILED, error, retry=transient(exc))
        return self.rollback(ctx, before, error)

    def interrupted(
        self, ctx: PhaseContext, before: Snapshot, exc: KeyboardInterrupt
    ) -> DrillResult:
        """A cancel (Ctrl-C, SIGTERM from a scheduler, a lost lease) is not a failure:
        stop cleanly."""
        error = str(exc) or "cancelled by an interrupt"
        log.warning("run %s %s", self.run_id, error)
        if not self.request.mode.rehearsal:
            return self.incident_stopped(RunStatus.CANCELLED, error)
        result = self.rollback(ctx, before, error)
        if result.status == RunStatus.ROLLED_BACK:
            result.status, result.verdict = RunStatus.CANCELLED, Verdict.CANCELLED
        return result

    def stopped_again(self, exc: BaseException) -> DrillResult:
        """Whatever escapes the phases' own handling comes while stopping: an interrupt or
        an error in the middle of an undo (a cancel during a failure's rollback, a second
        Ctrl-C outside the signal handler). What the undo left is not known, so the run is
        recorded as left unfinished, for `drills recover`, never left `running`."""
        why = (
            "interrupted" if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}: {exc}"
        )
        log.error("run %s stopped while stopping: %s", self.run_id, why, exc_info=True)
        error = f"{self.stopping or 'stopping'}; then, while stopping: {why}"
        if self.request.mode == Mode.INCIDENT:
            return self.incident_stopped(RunStatus.CANCELLED, error)
        error += f". `drills recover {self.run_id}` finishes it."
        return self.result(RunStatus.ROLLBACK_FAILED, None, drift=None, error=error)

    def incident_stopped(
        self, status: RunStatus, error: str, *, retry: bool = False
    ) -> DrillResult:
        """An incident never fails back on its own: it stops, and says what the operator may
        do. One that failed part-way is held and announced as stuck; recover-orphans retries
        it when a deadline stopped it (``retry``; drills.takeover.stuck)."""
        journal = self.recorder.journal
        if journal.to_undo() and status == RunStatus.FAILED:
            stuck = hold_stuck(self.recorder.plan, self.run_id, error, auto_retry=retry)
            self.recorder.details.stuck = stuck
            error += (
                f"; the takeover stopped part-way and is held, stuck: {stuck.state}. "
                f"`{stuck.command}` continues it"
                + (" (recover-orphans retries it every minute)" if retry else "")
                + ", `--hold` keeps DR as it is."
            )
        elif journal.to_undo():
            error += (
                f"; the takeover stopped part-way, see the journal. "
                f"`{continue_command(self.run_id)}` finishes it, `--hold` keeps DR as it is."
            )
        return self.result(status, None, error=error)

    def rollback(self, ctx: PhaseContext, before: Snapshot, error: str) -> DrillResult:
        self.stopping = error
        self.recorder.undoing = True
        try:
            with self.timeline.phase("rollback"):
                safe_rollback(ctx.executor, ctx.plan, self.timeline)
            drift = self.verify(ctx, before, "verify rollback") if before else {}
        except DrillError as exc:
            # The state was never compared with the snapshot: its drift is unknown.
            return self.result(
                RunStatus.ROLLBACK_FAILED, None, drift=None, error=f"{error}; rollback: {exc}"
            )
        status = RunStatus.ROLLED_BACK if not drift else RunStatus.ROLLBACK_FAILED
        return self.result(status, None, drift=drift, error=error)

    def verify(self, ctx: PhaseContext, before: Snapshot, name: str) -> dict[str, Any]:
        """The state now against ``before``: the differences, an empty dict when none."""
        with self.timeline.phase(name), self.timeline.step("compare with the snapshot") as step:
            # A target that fails for now (a DNS server not answering yet) is read again.
            deadline = time.monotonic() + VERIFY_DEADLINE_S
            now = persist(ctx, step, partial(take, ctx.plan, ctx.targets), deadline)
            drift = differences(before, now)
            step.evidence = {"addresses": len(before), "differences": drift}
            step.result = "identical" if not drift else f"{len(drift)} difference(s)"
            if drift:
                step.status = "failed"
            return drift


__all__ = ["VERIFY_DEADLINE_S", "RunEnding", "left_part_way"]
