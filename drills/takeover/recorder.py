"""Every store write and notice of one run, apart from the phases it goes through.

A ``Drill`` sequences the takeover; this keeps its record: the run's row (created,
updated, finished), its live timeline, its write-ahead journal and backlog (a store
outage never loses a record), the lease and the guards read from the store before it
starts, the audit of what an operator accepted, and the notices of its start and end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from drills.checks.readiness import refresh_after_run
from drills.checks.runner import ReadinessReport
from drills.errors import RunRefused
from drills.notify.runs import announce_finish, announce_start
from drills.plan import DrillPlan, plan_digest
from drills.plan.claims import Claim
from drills.store.details import RunDetails
from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus
from drills.store.models import DrillRun
from drills.store.serving import serving_from_dr_refusal
from drills.takeover.forecasted import forecast_record
from drills.takeover.lease import PlanLease, UnfinishedRunError
from drills.takeover.live import LiveTimeline
from drills.takeover.request import DrillRequest, DrillResult
from drills.takeover.timeline import Timeline, utc_now
from drills.takeover.write_ahead import (
    Backlog,
    WriteAheadJournal,
    refuse_nondurable,
    replay_left,
    state_dir,
    write_ahead_file,
)

log = logging.getLogger("drills.takeover.recorder")

ACCEPT_ACTION = "accept-blocking"  # the audit log's word for a run past a blocking failure


class RunRecorder:
    """The record of one run: what the store, the write-ahead file and the notices get."""

    def __init__(
        self,
        request: DrillRequest,
        history: HistoryStore,
        run_id: str,
        timeline: Timeline,
        details: RunDetails,
    ) -> None:
        self.request = request
        self.plan: DrillPlan = request.plan  # a failback may narrow it to one application
        self.history = history
        self.run_id = run_id
        self.details = details
        self.live = LiveTimeline(
            history, run_id, timeline, store_out=lambda: self.backlog.outage is not None
        )
        # Kept in memory and in a local file too: a store outage never loses it (write_ahead).
        self.backlog = Backlog(run_id)
        self.local_dir = state_dir(history.url)
        self.journal = WriteAheadJournal(
            history, run_id, self.backlog, write_ahead_file(self.local_dir, run_id),
            halt=self._halts_on_outage,
        )  # fmt: skip
        self.undoing = False  # a drill's undo goes on through a store outage

    # -- before the run ------------------------------------------------------------
    def store_ready(self) -> None:
        """A store that keeps what it acknowledges (an incident is only warned), and the
        records runs here left in their write-ahead files during an outage written back."""
        if not self.request.dry_run:
            refuse_nondurable(self.history, incident=self.request.mode == Mode.INCIDENT)
            replay_left(self.history, self.local_dir)

    def refuse_at_dr(self) -> None:
        """A takeover starts from the primary; a plan serving from DR goes home first."""
        if self.request.mode == Mode.FAILBACK:
            return
        refusal = serving_from_dr_refusal(self.history, self.plan.name)
        if refusal:
            raise RunRefused(refusal)

    def refuse_unfinished(self) -> None:
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

    def lease(self, claims: tuple[Claim, ...], *, on_lost: Callable[[str], None]) -> PlanLease:
        """The plan's lease, and ``claims`` on targets shared with other plans, or with
        other applications of this one."""
        return PlanLease(self.history, self.plan.lease_name, self.run_id,
                         lease_s=self.request.lease_s, claims=claims,
                         on_lost=on_lost)  # fmt: skip

    # -- the run's record --------------------------------------------------------------
    def _run_row(self, status: RunStatus, **fields: Any) -> DrillRun:
        req = self.request
        return DrillRun(
            id=self.run_id, plan=self.plan.name, plan_digest=plan_digest(self.plan),
            mode=req.mode, operator=req.operator, reason=req.reason, status=status,
            flow_run_id=req.flow_run_id, details=self.details, **fields,
        )  # fmt: skip

    def skipped(self, why: str) -> DrillResult:
        """A scheduled run a gate held back: recorded as skipped, nothing leased or changed."""
        now = utc_now()
        self.history.create_run(
            self._run_row(RunStatus.SKIPPED, dry_run=False, started_at=now, finished_at=now,
                          error=why)
        )  # fmt: skip
        timeline = self.live.timeline
        return DrillResult(self.run_id, RunStatus.SKIPPED, None, None, timeline, error=why)

    def started(self) -> None:
        req = self.request
        self.history.create_run(
            self._run_row(RunStatus.RUNNING, dry_run=req.dry_run, started_at=utc_now())
        )
        announce_start(
            self.plan, self.run_id, req.mode, req.operator, req.reason, dry_run=req.dry_run
        )

    def update(self, **fields: Any) -> None:
        """Write some of the run's fields, now or, while the store is out, once it is back."""
        self.backlog.submit(partial(self.history.update_run, self.run_id, **fields))

    def update_now(self, **fields: Any) -> None:
        """Write some of the run's fields at once: a store that does not answer raises here,
        and the caller stops on it (a failback, which brings writes home, never goes on
        without its record)."""
        self.history.update_run(self.run_id, **fields)

    def audit_accepted(self, accepted: list[str]) -> None:
        self.history.audit(
            who=self.request.operator, action=ACCEPT_ACTION, plan=self.plan.name,
            accepted=True, reason=self.request.reason,
            detail={"mode": str(self.request.mode), "run": self.run_id, "checks": accepted},
        )  # fmt: skip

    def on_event(self, event: str) -> None:
        if event == "phase-end":
            self.live.write_now()
        elif event in ("step-end", "step-wait"):
            self.live.write_soon()  # seen live, without holding up the next step

    def _halts_on_outage(self) -> bool:
        """A store that does not answer stops a drill going forward; an incident goes on
        toward service, and an undo goes on to its end."""
        return self.request.mode.rehearsal and not self.undoing

    # -- the end -----------------------------------------------------------------------
    def finish(
        self,
        result: DrillResult,
        readiness: ReadinessReport | None,
        *,
        left: bool,
        checks: Any = None,
    ) -> None:
        """The run's last record: its fields, its details, the readiness a real drill
        changed (``checks``: the registry its preflight used), and its notice. ``left``: it
        left production part-way, and waits for `drills recover` or a decision."""
        m = result.measurement
        self.details.planned = [p.describe() for p in result.planned]
        self.details.drift = result.drift
        # A stuck incident stopped by a deadline is retried by recover-orphans: it waits for
        # no one.
        stuck = self.details.stuck
        self.details.left_for_decision = left and not (stuck is not None and stuck.auto_retry)
        if m is not None:
            self.details.measurement = m.record()
            self.details.forecast = forecast_record(readiness, m.rto_seconds)
        self.update(
            status=result.status,
            verdict=result.verdict,
            finished_at=None if left else utc_now(),
            rto_seconds=m.rto_seconds if m else None,
            client_rto_seconds=m.client_rto_seconds if m else None,
            preemption_seconds=m.preemption_seconds if m else None,
            carry_seconds=m.carry_seconds if m else None,
            rpo_seconds=m.rpo_seconds if m else {},
            timeline=self.live.timeline.to_json(),
            readiness=readiness.to_json() if readiness else {},
            details=self.details,
            error=result.error,
        )
        self._kept(result, finished=not left)
        if not left:
            self._refresh_readiness(readiness, checks)
        announce_finish(
            self.plan, self.run_id, self.request.mode, status=result.status,
            verdict=result.verdict, rto_s=m.rto_seconds if m else None,
            rpo_s=m.rpo_seconds if m else {}, error=result.error, dry_run=self.request.dry_run,
        )  # fmt: skip

    def _refresh_readiness(self, readiness: ReadinessReport | None, checks: Any) -> None:
        """A real drill, recorded, changes what its preflight found (the last successful
        drill, the forecast): those checks are asked again and the snapshot stored."""
        if self.request.mode != Mode.DRILL or self.request.dry_run or readiness is None:
            return
        if self.plan.application is not None:  # one application's checks: not the plan's
            return
        try:
            refresh_after_run(self.plan, self.history, readiness, registry=checks)
        except Exception:  # the run is recorded; a stale snapshot must not fail it
            log.warning("run %s: readiness not re-evaluated after the run", self.run_id,
                        exc_info=True)  # fmt: skip

    def _kept(self, result: DrillResult, *, finished: bool) -> None:
        """The store has the run's record, or the result says where it waits."""
        unwritten = self.journal.settle(
            self.details, result.status, result.error, finished=finished,
            wait_s=self.request.store_wait_s,
        )  # fmt: skip
        if unwritten:
            result.error = f"{result.error + '; ' if result.error else ''}{unwritten}"
            log.error("run %s: %s", self.run_id, result.error)


__all__ = ["ACCEPT_ACTION", "RunRecorder"]
