"""A minimum-takeover drill, or the same takeover for a real incident.

``Drill.run()`` goes through the phases of a takeover in order (the docs'
"The takeover drill" lists them), records each in the timeline and the history
store, and on any failure in drill mode rolls back to the exact starting state
(verified by snapshot). In incident mode a failure stops and reports; it never
fails back on its own.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, TypeVar

from drills.checks.areas.identity import CHECK_ID as DISTINCT_CHECK
from drills.checks.areas.identity import distinct_result
from drills.checks.base import CheckRegistry
from drills.checks.checkup import check_context, select_checks
from drills.checks.readiness import refresh_after_run, run_readiness
from drills.checks.runner import ReadinessReport, run_checks
from drills.errors import DrillError, NotMet, RunRefused
from drills.notify.runs import announce_finish, announce_start
from drills.plan import DrillPlan, plan_digest
from drills.plan.claims import Claim, plan_claims
from drills.store.details import Approval, RunDetails
from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus, Verdict
from drills.store.models import DrillRun
from drills.store.serving import serving_from_dr_refusal
from drills.takeover import carry
from drills.takeover.after_switch import AfterSwitch
from drills.takeover.cancellation import cancel_run
from drills.takeover.detection import detection_problem, detection_record
from drills.takeover.forecasted import forecast_record
from drills.takeover.gates import gate_run
from drills.takeover.lease import LEASE_S, PlanLease, UnfinishedRunError
from drills.takeover.live import LiveTimeline
from drills.takeover.measure import Measurement, measure_facts
from drills.takeover.snapshot import Snapshot, differences, take
from drills.takeover.steps.executor import ChangeExecutor, PlannedChange
from drills.takeover.steps.phases import PhaseContext, persist, preflight_guard
from drills.takeover.steps.rollback import safe_rollback, wait_primary_serves
from drills.takeover.steps.sequence import TAKEOVER, list_changes
from drills.takeover.stuck import continue_command, hold_stuck, transient
from drills.takeover.timeline import Listener, PhaseRecord, StepRecord, Timeline, utc_now
from drills.takeover.validation_jobs import ValidationJobs, validation_jobs
from drills.takeover.write_ahead import (
    Backlog,
    WriteAheadJournal,
    refuse_nondurable,
    replay_left,
    state_dir,
    write_ahead_file,
)
from drills.targets.sites import Targets

log = logging.getLogger("drills.takeover.drill")

T = TypeVar("T")
PhaseRunner = Callable[[str, Callable[[], Any]], Any]
# How long a run that ends waits for the readiness checks still going beside it. Each
# check has a deadline of its own; this only bounds a hung thread. An interrupted run
# (a cancel, which a scheduler follows with a kill) waits less.
READINESS_WAIT_S = 60.0
READINESS_WAIT_INTERRUPTED_S = 5.0
# Phases a run goes through when it stops: a lost lease must not interrupt them.
STOPPING_PHASES = frozenset({"rollback", "complete forward"})
# How long an incident waits, after its preflight, for the state before to be read.
INCIDENT_SNAPSHOT_WAIT_S = 5.0
# How long the state after a failback or rollback may take to be read, its targets retried.
VERIFY_DEADLINE_S = 60.0


class DrillAborted(DrillError):  # noqa: N818 - it is not an error of ours: the drill stopped on purpose
    """Stopped before any change: a blocking readiness failure, or approval refused."""


@dataclass(frozen=True)
class DrillRequest:
    plan: DrillPlan
    mode: Mode = Mode.DRILL
    dry_run: bool = False
    operator: str = "unknown"
    reason: str = ""
    declared_at: dt.datetime | None = None  # an incident's T0: when a person declared it
    # An incident's detection, before T0: an alert's startsAt (``proposal`` approved) or
    # the time an operator gives.
    detected_at: dt.datetime | None = None
    proposal: str | None = None
    force_unfenced: bool = False
    tier_deadline_s: float = 600.0
    fence_deadline_s: float = 60.0
    dns_deadline_s: float = 120.0
    sync_deadline_s: float = 300.0  # a failback's final sync: every DR write at the primary
    run_id: str | None = None
    flow_run_id: str | None = None
    plan_path: str | None = None  # kept in the run record, so `drills recover` can reload it
    lease_s: float = LEASE_S
    # How long a run that ended waits for a history store that does not answer, to write
    # its record; past it, the record waits in the run's write-ahead file.
    store_wait_s: float = 600.0
    # A scheduled run that a gate holds back is skipped (recorded), not refused.
    scheduled: bool = False
    # Go on when a gate cannot be verified (Alertmanager does not answer); audited.
    ignore_gates: bool = False
    # A drill or practice goes on past these blocking readiness failures (audited): to see
    # how far a DR known to be short gets, such as one that fails capacity.carry.
    accept_blocking: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Callers outside typed code (a flow's parameters, a test) may give the plain word.
        object.__setattr__(self, "mode", Mode(self.mode))
        if self.detected_at is not None and self.mode != Mode.INCIDENT:
            raise ValueError("a detection time (detected_at) belongs to an incident only")
        if self.accept_blocking and not self.mode.rehearsal:
            raise ValueError("accepting blocking readiness failures belongs to a drill or "
                             "a practice: an incident is never blocked by them")  # fmt: skip
        problem = detection_problem(self.detected_at, self.declared_at)
        if problem:
            raise ValueError(problem)


def approval_question(request: DrillRequest) -> tuple[str, str]:
    """What an approver is asked, and what approving does: one wording for the terminal
    prompt and the Prefect pause form, by the run's mode."""
    name = request.plan.name
    if request.plan.application:
        name += f" (application {request.plan.application})"
    if request.mode == Mode.FAILBACK:
        return (
            f"Approve the failback of {name}?",
            "Approving stops the DR writers, waits until their writes are at the primary, "
            "brings the primary up, switches DNS back to it and returns DR to standby.",
        )
    if request.mode == Mode.PRACTICE:
        return (
            f"Approve the practice of {name}?",
            "Approving brings DR's critical tier up beside the primary, which is not fenced "
            "and keeps its DNS record, verifies DR, then returns it to standby.",
        )
    effect = "Approving fences the primary site and brings DR up"
    if request.mode == Mode.DRILL:
        return f"Approve the drill of {name}?", f"{effect}, then fails back after measuring."
    return f"Approve the incident takeover of {name}?", f"{effect}; DR stays serving."


@dataclass
class DrillHooks:
    """How a caller (CLI, flow, test) takes part in a run."""

    approve: Callable[[DrillRequest], Approval] | None = None
    confirm: Callable[[list[PlannedChange]], bool] | None = None
    listener: Listener | None = None
    crash_point: Callable[[str], None] | None = None
    run_phase: PhaseRunner = field(default=lambda _name, body: body())
    # The readiness checks of the preflight (every check of drills by default). The
    # guards before the first change (sites.distinct) always use drills' own.
    checks: CheckRegistry | None = None


@dataclass
class DrillResult:
    run_id: str
    status: RunStatus
    verdict: Verdict | None
    measurement: Measurement | None
    timeline: Timeline
    planned: list[PlannedChange] = field(default_factory=list)
    # None: not verified (the rollback itself failed before the state could be compared).
    drift: dict[str, Any] | None = field(default_factory=dict)
    error: str | None = None


_NO_DRIFT: dict[str, Any] = {}
ACCEPT_ACTION = "accept-blocking"  # the audit log's word for a run past a blocking failure
# A run that stopped short of a measurement: why it did, as its verdict.
_STOPPED_VERDICTS = {RunStatus.ABORTED: Verdict.ABORTED, RunStatus.CANCELLED: Verdict.CANCELLED}


class Drill:
    def __init__(
        self, request: DrillRequest, history: HistoryStore, hooks: DrillHooks | None = None
    ) -> None:
        self.request = request
        self.plan = request.plan
        self.history = history
        self.hooks = hooks or DrillHooks()
        self.run_id = request.run_id or uuid.uuid4().hex[:12]
        self.timeline = Timeline(self._on_event)
        self.live = LiveTimeline(
            history, self.run_id, self.timeline, store_out=lambda: self.backlog.outage is not None
        )
        # Kept in memory and in a local file too: a store outage never loses it (write_ahead).
        self.backlog = Backlog(self.run_id)
        self.local_dir = state_dir(history.url)
        self.journal = WriteAheadJournal(
            history, self.run_id, self.backlog, write_ahead_file(self.local_dir, self.run_id),
            halt=self._halts_on_outage,
        )  # fmt: skip
        self._undoing = False  # a drill's undo goes on through a store outage
        self._not_met = False  # DR answered but did not prove it carries: the verdict says so
        self.t0: dt.datetime | None = None
        self.readiness: ReadinessReport | None = None
        self.stopping: str | None = None  # why the run is undoing itself, once it is
        self._readiness_beside: threading.Thread | None = None
        self.details = RunDetails(
            plan_path=request.plan_path,
            force_unfenced=request.force_unfenced,
            application=self.plan.application,
            detection=detection_record(request.detected_at, request.declared_at, request.proposal),
        )
        # While the run goes forward, a lost lease stops it; once it stops (rolls back,
        # completes forward, records), nothing may interrupt that.
        self._stoppable = False
        self._stoppable_lock = threading.Lock()
        self._thread_id = threading.get_ident()
        self.after_switch = AfterSwitch(self.plan, request.mode, self.details, self.run_id)

    # -- the run ---------------------------------------------------------------
    def run(self) -> DrillResult:
        """Run it, holding the plan's lease; raises LeaseHeldError or UnfinishedRunError
        (before anything is recorded or changed) when another run has the plan, and
        RunRefused when the plan already serves from DR."""
        self._thread_id = threading.get_ident()
        held_back = gate_run(self.request, self.history, self.details)
        if held_back is not None:
            return self._skipped(held_back)
        with self._exclusive():
            return self._run()

    def _skipped(self, why: str) -> DrillResult:
        """A scheduled run a gate held back: recorded as skipped, nothing leased or changed."""
        now = utc_now()
        self.history.create_run(
            DrillRun(
                id=self.run_id, plan=self.plan.name, plan_digest=plan_digest(self.plan),
                mode=self.request.mode, dry_run=False, operator=self.request.operator,
                reason=self.request.reason, status=RunStatus.SKIPPED, started_at=now,
                finished_at=now, flow_run_id=self.request.flow_run_id, details=self.details,
                error=why,
            )
        )  # fmt: skip
        return DrillResult(self.run_id, RunStatus.SKIPPED, None, None, self.timeline, error=why)

    def preview(self) -> list[PlannedChange]:
        """Every change a run would make, as the world stands now. Nothing is recorded and no
        lease taken: what an operator is asked before the run starts, so that saying no leaves
        no run behind. Raises RunRefused or UnfinishedRunError as ``run`` would."""
        self._refuse_at_dr()
        self._refuse_unfinished()
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
        self._store_ready()
        self._refuse_at_dr()
        if self.request.dry_run:  # changes nothing: needs no lease, blocks nobody
            yield
            return
        # Targets shared with other plans, or other applications of this one, are leased too.
        held = PlanLease(self.history, self.plan.lease_name, self.run_id,
                         lease_s=self.request.lease_s, claims=self._claims(),
                         on_lost=self._lease_lost)  # fmt: skip
        with held:
            self._refuse_unfinished()
            yield

    def _claims(self) -> tuple[Claim, ...]:
        return plan_claims(self.plan)

    def _refuse_unfinished(self) -> None:
        # Another application's run (running, or crashed on targets it leases still) is not
        # in this one's way; the whole plan's, or this application's, is.
        mine = self.plan.application
        unfinished = [
            r for r in self.history.unfinished_runs(self.plan.name)
            if not r.dry_run and r.id != self.run_id
            and (mine is None or r.details.application in (None, mine))
        ]  # fmt: skip
        if unfinished:
            raise UnfinishedRunError(self.plan.name, unfinished[0].id, unfinished[0].status)

    def _store_ready(self) -> None:
        """A store that keeps what it acknowledges (an incident is only warned), and the
        records runs here left in their write-ahead files during an outage written back."""
        if not self.request.dry_run:
            refuse_nondurable(self.history, incident=self.request.mode == Mode.INCIDENT)
            replay_left(self.history, self.local_dir)

    def _refuse_at_dr(self) -> None:
        """A takeover starts from the primary; a plan serving from DR goes home first."""
        if self.request.mode == Mode.FAILBACK:
            return
        refusal = serving_from_dr_refusal(self.history, self.plan.name)
        if refusal:
            raise RunRefused(refusal)

    def _run(self) -> DrillResult:
        req = self.request
        self.history.create_run(
            DrillRun(
                id=self.run_id,
                plan=self.plan.name,
                plan_digest=plan_digest(self.plan),
                mode=req.mode,
                dry_run=req.dry_run,
                operator=req.operator,
                reason=req.reason,
                status=RunStatus.RUNNING,
                started_at=utc_now(),
                flow_run_id=req.flow_run_id,
                details=self.details,
            )
        )
        announce_start(
            self.plan, self.run_id, req.mode, req.operator, req.reason, dry_run=req.dry_run
        )
        with Targets(self.plan) as targets:
            executor = ChangeExecutor(
                targets, self.journal, dry_run=req.dry_run, crash_point=self.hooks.crash_point,
                undo_expected=req.mode != Mode.INCIDENT,
            )  # fmt: skip
            ctx = PhaseContext(
                self.plan,
                targets,
                executor,
                self.timeline,
                force_unfenced=req.force_unfenced,
                incident=req.mode == Mode.INCIDENT,
                tier_deadline_s=req.tier_deadline_s,
                fence_deadline_s=req.fence_deadline_s,
                dns_deadline_s=req.dns_deadline_s,
            )
            try:
                self._going_forward(True)
                result = self._run_phases(ctx)
            except (KeyboardInterrupt, Exception) as exc:  # noqa: BLE001 - recorded, logged
                result = self._stopped_again(exc)
            finally:
                self._going_forward(False)
                self.live.close()
                # On every path: an incident forced on unfenced that stopped part-way too.
                self.details.unfenced = bool(ctx.facts.get("unfenced"))
        self._finish(result)
        return result

    def _going_forward(self, forward: bool) -> bool:
        """Set whether a lost lease may still stop the run; returns whether it could."""
        with self._stoppable_lock:
            was, self._stoppable = self._stoppable, forward
        return was

    def _lease_lost(self, why: str) -> None:
        """Called by the lease's heartbeat: stop the run as a cancel does (a drill rolls
        back, an incident stops and reports), before another host recovers it."""
        if self._going_forward(False):
            cancel_run(self._thread_id, why)
        else:
            log.error("run %s: %s; it is already stopping", self.run_id, why)

    def _stopped_again(self, exc: BaseException) -> DrillResult:
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
            return self._incident_stopped(RunStatus.CANCELLED, error)
        error += f". `drills recover {self.run_id}` finishes it."
        return self._result(RunStatus.ROLLBACK_FAILED, None, drift=None, error=error)

    def _run_phases(self, ctx: PhaseContext) -> DrillResult:
        before: Snapshot = {}
        wait_s = READINESS_WAIT_S
        try:
            before = self._prepare(ctx)
            self._declare()
            self._approve()
            if self.request.dry_run:
                return self._dry_run(ctx)
            self._confirm(ctx)
            return self._take_over(ctx, before)
        except (DrillAborted, RunRefused) as exc:
            return self._result(RunStatus.ABORTED, None, error=str(exc))
        except KeyboardInterrupt as exc:
            wait_s = READINESS_WAIT_INTERRUPTED_S
            return self._interrupted(ctx, before, exc)
        except (DrillError, Exception) as exc:  # noqa: BLE001 - _failed logs it, traceback too
            return self._failed(ctx, before, exc)
        finally:
            self.after_switch.close()
            self._await_readiness(wait_s)

    def _prepare(self, ctx: PhaseContext) -> Snapshot:
        """The preflight, then the state before the run, stored before any change: a
        drill returns to it; an incident's failback ends in it.

        An incident reads it beside its preflight, so the fence is not held up by it.
        """
        if self.request.mode.rehearsal:
            self._preflight(ctx)
            before = take(self.plan, ctx.targets)
        elif self.request.dry_run:
            self._preflight(ctx)
            return {}
        else:
            before = self._incident_snapshot(ctx)
            if not before:
                return {}
        # Durable before the first change: `drills recover` and a failback verify against it.
        self.details.snapshot_before = before
        self._update(details=self.details)
        return before if self.request.mode.rehearsal else {}

    def _incident_snapshot(self, ctx: PhaseContext) -> Snapshot:
        """An incident's state before, read beside its preflight. The primary may be down:
        a snapshot that cannot be read in time is done without (the failback then goes
        back to the originals of the journal), never waited for."""
        pool = ThreadPoolExecutor(1, "snapshot-before")
        try:
            reading = pool.submit(contextvars.copy_context().run, take, self.plan, ctx.targets)
            self._preflight(ctx)
            try:
                return reading.result(timeout=INCIDENT_SNAPSHOT_WAIT_S)
            except (DrillError, TimeoutError) as exc:
                log.warning("run %s: no snapshot of the state before (%s)", self.run_id, exc)
                return {}
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

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
            self._await_readiness(READINESS_WAIT_S)
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
            return self._result(RunStatus.SUCCEEDED, measurement)
        self._phase("failback", partial(self._failback, ctx))
        drift = self._verify(ctx, before, "verify failback")
        status = RunStatus.SUCCEEDED if not drift else RunStatus.FAILBACK_DRIFT
        return self._result(status, measurement, drift=drift)

    def _validate(self, jobs: ValidationJobs, *, judge: bool) -> None:
        if jobs.jobs:
            self._phase("validation jobs", partial(jobs.finish, self._keep_jobs, judge=judge))

    def _keep_jobs(self, records: list[Any]) -> None:
        self.details.validation_jobs = records
        self._update(details=self.details)

    def _interrupted(
        self, ctx: PhaseContext, before: Snapshot, exc: KeyboardInterrupt
    ) -> DrillResult:
        """A cancel (Ctrl-C, SIGTERM from a scheduler, a lost lease) is not a failure:
        stop cleanly."""
        self._going_forward(False)
        error = str(exc) or "cancelled by an interrupt"
        log.warning("run %s %s", self.run_id, error)
        if not self.request.mode.rehearsal:
            return self._incident_stopped(RunStatus.CANCELLED, error)
        result = self._rollback(ctx, before, error)
        if result.status == RunStatus.ROLLED_BACK:
            result.status, result.verdict = RunStatus.CANCELLED, Verdict.CANCELLED
        return result

    def _failed(self, ctx: PhaseContext, before: Snapshot, exc: Exception) -> DrillResult:
        """Whatever went wrong, even a bug of ours, must not leave production half failed
        over: a drill rolls back first, and the cause goes with the result."""
        self._going_forward(False)
        error = f"{type(exc).__name__}: {exc}" if not isinstance(exc, DrillError) else str(exc)
        self._not_met = isinstance(exc, NotMet)
        self.details.capacity = ctx.facts.get("capacity")  # measured before it stopped, if so
        log.error("run %s failed: %s", self.run_id, error, exc_info=not isinstance(exc, DrillError))
        if not self.request.mode.rehearsal:
            return self._incident_stopped(RunStatus.FAILED, error, retry=transient(exc))
        return self._rollback(ctx, before, error)

    def _incident_stopped(
        self, status: RunStatus, error: str, *, retry: bool = False
    ) -> DrillResult:
        """An incident never fails back on its own: it stops, and says what the operator may
        do. One that failed part-way is held and announced as stuck; recover-orphans retries
        it when a deadline stopped it (``retry``; drills.takeover.stuck)."""
        if self.journal.to_undo() and status == RunStatus.FAILED:
            stuck = hold_stuck(self.plan, self.run_id, error, auto_retry=retry)
            self.details.stuck = stuck
            error += (
                f"; the takeover stopped part-way and is held, stuck: {stuck.state}. "
                f"`{stuck.command}` continues it"
                + (" (recover-orphans retries it every minute)" if retry else "")
                + ", `--hold` keeps DR as it is."
            )
        elif self.journal.to_undo():
            error += (
                f"; the takeover stopped part-way, see the journal. "
                f"`{continue_command(self.run_id)}` finishes it, `--hold` keeps DR as it is."
            )
        return self._result(status, None, error=error)

    def _phase(self, name: str, body: Callable[[], T]) -> T:
        """Run one phase in the timeline, through the caller's runner (a Prefect task, say)."""
        with self.timeline.phase(name):
            return self.hooks.run_phase(name, body)

    def _failback(self, ctx: PhaseContext) -> None:
        self._undoing = True
        safe_rollback(ctx.executor, self.plan, self.timeline)
        wait_primary_serves(self.plan, self.timeline, deadline_s=self.request.tier_deadline_s)

    # -- phases that do not change anything ----------------------------------------
    def _preflight(self, ctx: PhaseContext) -> None:
        """What must hold before the first change, in every mode: two sites that are two,
        and a fence that can be proven (or is forced). In a drill, the readiness checks
        too: a blocking failure stops it here. An incident cannot be stopped by them, so it
        runs them beside the takeover, and keeps their result as its readiness at T0."""
        guard: ReadinessReport | None
        with self.timeline.phase("preflight") as phase:
            if self.request.mode == Mode.INCIDENT and not self.request.dry_run:
                self._start_readiness_beside(phase)
                guard = self._distinct(ctx)
            else:
                with self.timeline.step("readiness checks") as step:
                    self._readiness(step)
                guard = self.readiness
                ctx.facts[carry.ROOM] = carry.room(self.readiness)
                if distinct_result(guard) is None:
                    # A registry without sites.distinct: drills' own check, as in an incident.
                    guard = self._distinct(ctx)
            preflight_guard(ctx, guard)
            if not self.request.dry_run:
                self.after_switch.baseline(ctx.targets, self.timeline)

    def _distinct(self, ctx: PhaseContext) -> ReadinessReport:
        """sites.distinct alone, drills' own check whatever the hooks give: the guard."""
        context = check_context(self.plan, ctx.targets, None)
        return run_checks(select_checks([DISTINCT_CHECK]), context)

    def _readiness(self, step: StepRecord) -> None:
        self.readiness = run_readiness(self.plan, history=self.history, registry=self.hooks.checks)
        failing = [r.id for r in self.readiness.blocking]
        accepted = [i for i in failing if i in self.request.accept_blocking]
        blocking = [i for i in failing if i not in accepted]
        step.evidence = {"blocking": blocking, "checks": len(self.readiness.results)}
        if accepted:
            step.evidence["accepted"] = accepted
        if blocking and self.request.mode.rehearsal:
            step.result = f"blocked by {', '.join(blocking)}"
            raise DrillAborted(f"preflight: blocking readiness failures: {', '.join(blocking)}")
        if accepted:
            step.result = f"going on past {', '.join(accepted)} (accepted by the operator)"
            if not self.request.dry_run:  # a preview changes nothing: nothing to answer for
                self._audit_accepted(accepted)
        if blocking:
            step.result = f"recorded and continuing (incident): {', '.join(blocking)}"

    def _audit_accepted(self, accepted: list[str]) -> None:
        self.history.audit(
            who=self.request.operator, action=ACCEPT_ACTION, plan=self.plan.name,
            accepted=True, reason=self.request.reason,
            detail={"mode": str(self.request.mode), "run": self.run_id, "checks": accepted},
        )  # fmt: skip

    def _start_readiness_beside(self, preflight: PhaseRecord) -> None:
        def check() -> None:
            try:
                with self.timeline.step("readiness checks", phase=preflight) as step:
                    self._readiness(step)
                    step.evidence["beside_takeover"] = True
                assert self.readiness is not None
                self._update(readiness=self.readiness.to_json())
            except Exception:  # recorded in its step; an incident goes on without it
                log.error("run %s: readiness checks failed", self.run_id, exc_info=True)

        # The caller's context (a Prefect flow run's logger, say) goes with the thread.
        run = contextvars.copy_context().run
        self._readiness_beside = threading.Thread(
            target=run, args=(check,), name=f"readiness-{self.run_id}", daemon=True
        )
        self._readiness_beside.start()

    def _await_readiness(self, timeout_s: float) -> None:
        thread = self._readiness_beside
        if thread is None or not thread.is_alive():
            return
        thread.join(timeout_s)
        if thread.is_alive():
            log.error("run %s: readiness checks still running after %.0fs", self.run_id, timeout_s)

    def _declare(self) -> None:
        with self.timeline.phase("declare"), self.timeline.step("record T0") as step:
            self.t0 = self.request.declared_at or utc_now()
            step.evidence = {"t0": self.t0.isoformat(), "declared": bool(self.request.declared_at)}
            # Detection -> declaration, measured against the T0 recorded here.
            detection = detection_record(self.request.detected_at, self.t0, self.request.proposal)
            if detection is not None:
                self.details.detection = detection
                step.evidence["detected_at"] = detection.detected_at.isoformat()
            self._update(t0=self.t0)

    def _approve(self) -> None:
        if not self.plan.approval.required:
            return
        with self.timeline.phase("approve"), self.timeline.step("wait for approval") as step:
            if self.hooks.approve is None:
                raise DrillAborted("the plan requires approval and nobody can give it here")
            answer = self.hooks.approve(self.request)
            self.details.approval = answer
            step.evidence = asdict(answer)
            if not answer.approved:
                raise DrillAborted(f"not approved by {answer.approver}: {answer.comment}")

    def _dry_run(self, ctx: PhaseContext) -> DrillResult:
        return self._result(RunStatus.DRY_RUN, None, planned=list_changes(ctx, "dry-run"))

    def _confirm(self, ctx: PhaseContext) -> None:
        if self.hooks.confirm is None:
            return
        if not self.hooks.confirm(self._planned(self._preview_context(ctx.targets))):
            raise DrillAborted("the operator did not confirm the changes")

    def _measure(self, ctx: PhaseContext) -> Measurement:
        assert self.t0 is not None
        self._update(restored_at=ctx.facts["restored_at"])
        return measure_facts(self.plan, self.t0, ctx.facts, self.readiness)

    def _verify(self, ctx: PhaseContext, before: Snapshot, name: str) -> dict[str, Any]:
        with self.timeline.phase(name), self.timeline.step("compare with the snapshot") as step:
            # A target that fails for now (a DNS server not answering yet) is read again.
            deadline = time.monotonic() + VERIFY_DEADLINE_S
            now = persist(ctx, step, partial(take, self.plan, ctx.targets), deadline)
            drift = differences(before, now)
            step.evidence = {"addresses": len(before), "differences": drift}
            step.result = "identical" if not drift else f"{len(drift)} difference(s)"
            if drift:
                step.status = "failed"
            return drift

    def _rollback(self, ctx: PhaseContext, before: Snapshot, error: str) -> DrillResult:
        self.stopping = error
        self._undoing = True
        try:
            with self.timeline.phase("rollback"):
                safe_rollback(ctx.executor, self.plan, self.timeline)
            drift = self._verify(ctx, before, "verify rollback") if before else {}
        except DrillError as exc:
            # The state was never compared with the snapshot: its drift is unknown.
            return self._result(
                RunStatus.ROLLBACK_FAILED, None, drift=None, error=f"{error}; rollback: {exc}"
            )
        status = RunStatus.ROLLED_BACK if not drift else RunStatus.ROLLBACK_FAILED
        return self._result(status, None, drift=drift, error=error)

    # -- records -----------------------------------------------------------------
    def _halts_on_outage(self) -> bool:
        """A store that does not answer stops a drill going forward; an incident goes on
        toward service, and an undo goes on to its end."""
        return self.request.mode.rehearsal and not self._undoing

    def _update(self, **fields: Any) -> None:
        """Write some of the run's fields, now or, while the store is out, once it is back."""
        self.backlog.submit(partial(self.history.update_run, self.run_id, **fields))

    def _result(
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
            stopped = Verdict.NOT_MET if self._not_met else Verdict.FAILED
            verdict = _STOPPED_VERDICTS.get(status, stopped)
        return DrillResult(
            self.run_id, status, verdict, measurement, self.timeline, planned or [],
            None if drift is None else dict(drift), error,
        )  # fmt: skip

    def _left_part_way(self, result: DrillResult) -> bool:
        """A run that left production other than it should: an incident that stopped
        (cancelled, failed) after changing something, or a drill whose rollback failed or
        whose journal still has changes to undo.

        Its run stays unfinished, like a crashed one: nothing new may start on the plan
        until `drills recover RUN` rolls the drill back, or an operator decides on the
        incident with `--complete` or `--hold`.
        """
        if result.status == RunStatus.ROLLBACK_FAILED:
            return True
        if self.request.mode.rehearsal:
            return bool(self.journal.to_undo())
        return result.status != RunStatus.SUCCEEDED and bool(self.journal.to_undo())

    def _finish(self, result: DrillResult) -> None:
        m = result.measurement
        self.details.planned = [p.describe() for p in result.planned]
        self.details.drift = result.drift
        left = self._left_part_way(result)
        # A stuck incident stopped by a deadline is retried by recover-orphans: it waits for
        # no one.
        stuck = self.details.stuck
        self.details.left_for_decision = left and not (stuck is not None and stuck.auto_retry)
        if m is not None:
            self.details.measurement = m.record()
            self.details.forecast = forecast_record(self.readiness, m.rto_seconds)
        self._update(
            status=result.status,
            verdict=result.verdict,
            finished_at=None if left else utc_now(),
            rto_seconds=m.rto_seconds if m else None,
            client_rto_seconds=m.client_rto_seconds if m else None,
            preemption_seconds=m.preemption_seconds if m else None,
            carry_seconds=m.carry_seconds if m else None,
            rpo_seconds=m.rpo_seconds if m else {},
            timeline=self.timeline.to_json(),
            readiness=self.readiness.to_json() if self.readiness else {},
            details=self.details,
            error=result.error,
        )
        self._record_kept(result, finished=not left)
        if not left:
            self._refresh_readiness()
        announce_finish(
            self.plan, self.run_id, self.request.mode, status=result.status,
            verdict=result.verdict, rto_s=m.rto_seconds if m else None,
            rpo_s=m.rpo_seconds if m else {}, error=result.error, dry_run=self.request.dry_run,
        )  # fmt: skip

    def _refresh_readiness(self) -> None:
        """A real drill, recorded, changes what its preflight found (the last successful
        drill, the forecast): those checks are asked again and the snapshot stored."""
        if self.request.mode != Mode.DRILL or self.request.dry_run or self.readiness is None:
            return
        if self.plan.application is not None:  # one application's checks: not the plan's
            return
        try:
            refresh_after_run(self.plan, self.history, self.readiness, registry=self.hooks.checks)
        except Exception:  # the run is recorded; a stale snapshot must not fail it
            log.warning("run %s: readiness not re-evaluated after the run", self.run_id,
                        exc_info=True)  # fmt: skip

    def _record_kept(self, result: DrillResult, *, finished: bool) -> None:
        """The store has the run's record, or the result says where it waits."""
        unwritten = self.journal.settle(
            self.details, result.status, result.error, finished=finished,
            wait_s=self.request.store_wait_s,
        )  # fmt: skip
        if unwritten:
            result.error = f"{result.error + '; ' if result.error else ''}{unwritten}"
            log.error("run %s: %s", self.run_id, result.error)

    def _on_event(self, event: str, phase: Any, step: Any) -> None:
        if event == "phase-start" and phase.name in STOPPING_PHASES:
            self._going_forward(False)  # a failback's undo or completion, say
        if event == "phase-end":
            self.live.write_now()
        elif event in ("step-end", "step-wait"):
            self.live.write_soon()  # seen live, without holding up the next step
        if self.hooks.listener is not None:
            self.hooks.listener(event, phase, step)
        if event in ("phase-start", "phase-end") and self.hooks.crash_point is not None:
            self.hooks.crash_point(f"phase:{phase.name}:{event.removeprefix('phase-')}")


__all__ = [
    "Approval",
    "Drill",
    "DrillAborted",
    "DrillHooks",
    "DrillRequest",
    "DrillResult",
    "Mode",
    "approval_question",
]
