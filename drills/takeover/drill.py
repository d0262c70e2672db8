"""A minimum-takeover drill, or the same takeover for a real incident.

``Drill.run()`` goes through the phases of a takeover in order (the docs'
"The takeover drill" lists them). Around it: the run's record in the history store
and its notices (``recorder``), the preflight and its readiness (``preflight``), and
the ways a run stops short (``ending``): in drill mode a failure rolls back to the
exact starting state (verified by snapshot); in incident mode it stops and reports,
and never fails back on its own.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, TypeVar

from drills.checks.runner import ReadinessReport
from drills.errors import DrillError, RunRefused
from drills.plan import DrillPlan
from drills.plan.claims import Claim, plan_claims
from drills.store.details import Approval, RunDetails
from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus
from drills.takeover.after_switch import AfterSwitch
from drills.takeover.approval import approval_question, approve, confirm
from drills.takeover.cancellation import LeaseStop
from drills.takeover.detection import detection_record
from drills.takeover.ending import RunEnding, left_part_way
from drills.takeover.gates import gate_run
from drills.takeover.measure import Measurement, measure_facts
from drills.takeover.preflight import Preflight
from drills.takeover.recorder import ACCEPT_ACTION, RunRecorder
from drills.takeover.request import DrillAborted, DrillHooks, DrillRequest, DrillResult
from drills.takeover.snapshot import Snapshot, take
from drills.takeover.steps.executor import ChangeExecutor, PlannedChange
from drills.takeover.steps.phases import PhaseContext
from drills.takeover.steps.rollback import safe_rollback, wait_primary_serves
from drills.takeover.steps.sequence import TAKEOVER, list_changes
from drills.takeover.timeline import Timeline, utc_now
from drills.takeover.validation_jobs import ValidationJobs, validation_jobs
from drills.targets.sites import Targets

log = logging.getLogger("drills.takeover.drill")

T = TypeVar("T")
# How long a run that ends waits for the readiness checks still going beside it. Each
# check has a deadline of its own; this only bounds a hung thread. An interrupted run
# (a cancel, which a scheduler follows with a kill) waits less.
READINESS_WAIT_S = 60.0
READINESS_WAIT_INTERRUPTED_S = 5.0
# Phases a run goes through when it stops: a lost lease must not interrupt them.
STOPPING_PHASES = frozenset({"rollback", "complete forward"})


class Drill:
    def __init__(
        self, request: DrillRequest, history: HistoryStore, hooks: DrillHooks | None = None
    ) -> None:
        self.request = request
        self.history = history
        self.hooks = hooks or DrillHooks()
        self.run_id = request.run_id or uuid.uuid4().hex[:12]
        self.timeline = Timeline(self._on_event)
        self.details = RunDetails(
            plan_path=request.plan_path,
            force_unfenced=request.force_unfenced,
            application=request.plan.application,
            detection=detection_record(request.detected_at, request.declared_at, request.proposal),
        )
        self.recorder = RunRecorder(request, history, self.run_id, self.timeline, self.details)
        self.journal = self.recorder.journal
        self.t0: dt.datetime | None = None
        self.lease_stop = LeaseStop(self.run_id)
        self.after_switch = AfterSwitch(self.plan, request.mode, self.details, self.run_id)
        self.preflight = Preflight(self.recorder, self.after_switch, self.hooks.checks)
        self.ending = RunEnding(self.recorder, self.timeline)

    @property
    def plan(self) -> DrillPlan:
        return self.recorder.plan

    @plan.setter
    def plan(self, plan: DrillPlan) -> None:  # a failback narrows it to one application
        self.recorder.plan = plan

    @property
    def readiness(self) -> ReadinessReport | None:
        return self.preflight.readiness

    @readiness.setter
    def readiness(self, report: ReadinessReport | None) -> None:
        self.preflight.readiness = report

    # -- the run ---------------------------------------------------------------
    def run(self) -> DrillResult:
        """Run it, holding the plan's lease; raises LeaseHeldError or UnfinishedRunError
        (before anything is recorded or changed) when another run has the plan, and
        RunRefused when the plan already serves from DR."""
        self.lease_stop.thread_id = threading.get_ident()
        held_back = gate_run(self.request, self.history, self.details)
        if held_back is not None:
            return self.recorder.skipped(held_back)
        with self._exclusive():
            return self._run()

    def preview(self) -> list[PlannedChange]:
        """Every change a run would make, as the world stands now. Nothing is recorded and no
        lease taken: what an operator is asked before the run starts, so that saying no leaves
        no run behind. Raises RunRefused or UnfinishedRunError as ``run`` would."""
        self._refuse_at_dr()
        self.recorder.refuse_unfinished()
        gate_run(self.request, self.history, RunDetails(), audit=False)  # refused before asking
        with Targets(self.plan) as targets:
            return self._planned(self._preview_context(targets))

    def _preview_context(self, targets: Targets) -> PhaseContext:
        # A timeline of its own: the preview is not part of the run.
        executor = ChangeExecutor(targets, self.journal, dry_run=True)
        return PhaseContext(self.plan, targets, executor, Timeline())

    def _planned(self, preview: PhaseContext) -> list[PlannedChange]:
        return list_changes(preview, "preview")

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        self.recorder.store_ready()
        self._refuse_at_dr()
        if self.request.dry_run:  # changes nothing: needs no lease, blocks nobody
            yield
            return
        with self.recorder.lease(self._claims(), on_lost=self.lease_stop.lost):
            self.recorder.refuse_unfinished()
            yield

    def _claims(self) -> tuple[Claim, ...]:
        return plan_claims(self.plan)

    def _refuse_at_dr(self) -> None:
        self.recorder.refuse_at_dr()

    def _run(self) -> DrillResult:
        req = self.request
        self.recorder.started()
        with Targets(self.plan) as targets:
            executor = ChangeExecutor(
                targets, self.journal, dry_run=req.dry_run, crash_point=self.hooks.crash_point,
                undo_expected=req.mode != Mode.INCIDENT,
            )  # fmt: skip
            ctx = PhaseContext(
                self.plan, targets, executor, self.timeline, force_unfenced=req.force_unfenced,
                incident=req.mode == Mode.INCIDENT, tier_deadline_s=req.tier_deadline_s,
                fence_deadline_s=req.fence_deadline_s, dns_deadline_s=req.dns_deadline_s,
            )  # fmt: skip
            try:
                self.lease_stop.going_forward(True)
                result = self._run_phases(ctx)
            except (KeyboardInterrupt, Exception) as exc:  # noqa: BLE001 - recorded, logged
                result = self.ending.stopped_again(exc)
            finally:
                self.lease_stop.going_forward(False)
                self.recorder.live.close()
                # On every path: an incident forced on unfenced that stopped part-way too.
                self.details.unfenced = bool(ctx.facts.get("unfenced"))
        left = self._left_part_way(result)
        self.recorder.finish(result, self.readiness, left=left, checks=self.hooks.checks)
        return result

    def _run_phases(self, ctx: PhaseContext) -> DrillResult:
        before: Snapshot = {}
        wait_s = READINESS_WAIT_S
        try:
            before = self._prepare(ctx)
            self._declare()
            approve(self.request, self.hooks, self.timeline, self.details)
            if self.request.dry_run:
                return self._dry_run(ctx)
            self._confirm(ctx)
            return self._take_over(ctx, before)
        except (DrillAborted, RunRefused) as exc:
            return self.ending.result(RunStatus.ABORTED, None, error=str(exc))
        except KeyboardInterrupt as exc:
            wait_s = READINESS_WAIT_INTERRUPTED_S
            self.lease_stop.going_forward(False)
            return self.ending.interrupted(ctx, before, exc)
        except (DrillError, Exception) as exc:  # noqa: BLE001 - logged there, traceback too
            self.lease_stop.going_forward(False)
            return self.ending.failed(ctx, before, exc)
        finally:
            self.after_switch.close()
            self.preflight.await_beside(wait_s)

    def _prepare(self, ctx: PhaseContext) -> Snapshot:
        """The preflight, then the state before the run, stored before any change: a
        drill returns to it; an incident's failback ends in it.

        An incident reads it beside its preflight, so the fence is not held up by it.
        """
        if self.request.mode.rehearsal:
            self.preflight.run(ctx)
            before = take(self.plan, ctx.targets)
        elif self.request.dry_run:
            self.preflight.run(ctx)
            return {}
        else:
            before = self.preflight.incident_snapshot(ctx)
            if not before:
                return {}
        # Durable before the first change: `drills recover` and a failback verify against it.
        self.details.snapshot_before = before
        self.recorder.update(details=self.details)
        return before if self.request.mode.rehearsal else {}

    def _take_over(self, ctx: PhaseContext, before: Snapshot) -> DrillResult:
        drill = self.request.mode == Mode.DRILL
        # Deleted however the run leaves this (a failure's rollback deletes them too).
        with validation_jobs(ctx, self.run_id, incident=not drill) as jobs:
            for phase in TAKEOVER:
                self._phase(phase.name, partial(phase.run, ctx))
                if phase.name == "bring-up" and drill:
                    jobs.start()  # beside the normal tier, off the RTO's path
                if phase.name == "smoke":  # DNS answers DR: the SLOs' clock runs from T0
                    assert self.t0 is not None
                    self.after_switch.start(self.t0)
            if drill:
                self._validate(jobs, judge=True)
            # The RPO at T0 comes from the readiness checks, which an incident runs beside
            # the takeover: the RTO is already fixed by the smoke, so waiting costs it nothing.
            self.preflight.await_beside(READINESS_WAIT_S)
            with self.timeline.phase("measure"), self.timeline.step("RTO and RPO") as step:
                measurement = self._measure(ctx)
                step.evidence = measurement.to_json()
                step.result = measurement.summary()
            if self.after_switch.active:  # a drill not met raises here, and so rolls back
                self._phase("after the switch", partial(self.after_switch.finish, ctx.targets,
                                                        self.timeline))  # fmt: skip
            if self.request.mode == Mode.INCIDENT:
                self._validate(jobs, judge=False)  # after its RTO; reported, never rolled back
        if self.request.mode != Mode.DRILL:
            return self.ending.result(RunStatus.SUCCEEDED, measurement)
        self._phase("failback", partial(self._failback, ctx))
        drift = self.ending.verify(ctx, before, "verify failback")
        status = RunStatus.SUCCEEDED if not drift else RunStatus.FAILBACK_DRIFT
        return self.ending.result(status, measurement, drift=drift)

    def _dry_run(self, ctx: PhaseContext) -> DrillResult:
        return self.ending.result(RunStatus.DRY_RUN, None, planned=list_changes(ctx, "dry-run"))

    def _validate(self, jobs: ValidationJobs, *, judge: bool) -> None:
        if jobs.jobs:
            self._phase("validation jobs", partial(jobs.finish, self._keep_jobs, judge=judge))

    def _keep_jobs(self, records: list[Any]) -> None:
        self.details.validation_jobs = records
        self.recorder.update(details=self.details)

    def _phase(self, name: str, body: Callable[[], T]) -> T:
        """Run one phase in the timeline, through the caller's runner (a Prefect task, say)."""
        with self.timeline.phase(name):
            return self.hooks.run_phase(name, body)

    def _failback(self, ctx: PhaseContext) -> None:
        self.recorder.undoing = True
        safe_rollback(ctx.executor, self.plan, self.timeline)
        wait_primary_serves(self.plan, self.timeline, deadline_s=self.request.tier_deadline_s)

    # -- phases that do not change anything ----------------------------------------
    def _declare(self) -> None:
        with self.timeline.phase("declare"), self.timeline.step("record T0") as step:
            self.t0 = self.request.declared_at or utc_now()
            step.evidence = {"t0": self.t0.isoformat(), "declared": bool(self.request.declared_at)}
            # Detection -> declaration, measured against the T0 recorded here.
            detection = detection_record(self.request.detected_at, self.t0, self.request.proposal)
            if detection is not None:
                self.details.detection = detection
                step.evidence["detected_at"] = detection.detected_at.isoformat()
            self.recorder.update(t0=self.t0)

    def _confirm(self, ctx: PhaseContext) -> None:
        if self.hooks.confirm is not None:  # the preview is read only for one who is asked
            confirm(self.hooks, self._planned(self._preview_context(ctx.targets)))

    def _measure(self, ctx: PhaseContext) -> Measurement:
        assert self.t0 is not None
        self.recorder.update(restored_at=ctx.facts["restored_at"])
        return measure_facts(self.plan, self.t0, ctx.facts, self.readiness)

    # -- the end -------------------------------------------------------------------
    def _left_part_way(self, result: DrillResult) -> bool:
        return left_part_way(result, self.request.mode, self.journal)

    def _on_event(self, event: str, phase: Any, step: Any) -> None:
        if event == "phase-start" and phase.name in STOPPING_PHASES:
            self.lease_stop.going_forward(False)  # a failback's undo or completion, say
        self.recorder.on_event(event)
        if self.hooks.listener is not None:
            self.hooks.listener(event, phase, step)
        if event in ("phase-start", "phase-end") and self.hooks.crash_point is not None:
            self.hooks.crash_point(f"phase:{phase.name}:{event.removeprefix('phase-')}")


__all__ = [
    "ACCEPT_ACTION",
    "Approval",
    "Drill",
    "DrillAborted",
    "DrillHooks",
    "DrillRequest",
    "DrillResult",
    "Mode",
    "approval_question",
]
