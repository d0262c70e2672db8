"""A failback: the run that brings production home from DR after an incident.

It is a run like a drill or an incident: journalled, approvable, cancellable,
recoverable by `drills recover`, timed, and holding the plan's lease. It runs only
while the plan serves from DR. Its preflight is the way-back readiness; a blocking
failure stops it before any change. Then the phases of ``steps.failback``.

A failure or a cancel before the DNS switch undoes the failback: DR serves exactly
as before it (verified against the snapshot it took before its first change).
After the switch it completes forward. A failback that ends verifies the state
against the one before the incident, and closes the incident.
"""

from __future__ import annotations

import datetime as dt
import logging
from functools import partial
from typing import Any

from drills.checks.areas.identity import distinct_result
from drills.checks.base import Status
from drills.checks.checkup import run_wayback
from drills.errors import DrillError, RunRefused
from drills.notify.runs import announce_incident_closed
from drills.plan import DrillPlan
from drills.plan.only import only_applications
from drills.store.details import FailbackRecord, IncidentLink
from drills.store.kinds import Mode, RunStatus, Verdict
from drills.store.models import DrillRun
from drills.store.serving import open_incident, recorded_serving
from drills.takeover.approval import approve
from drills.takeover.drill import Drill
from drills.takeover.journal import Journal
from drills.takeover.request import DrillAborted, DrillResult
from drills.takeover.snapshot import Snapshot, take
from drills.takeover.steps.executor import PlannedChange
from drills.takeover.steps.failback import (
    AFTER_DNS,
    BEFORE_DNS,
    DNS_BACK,
    FailbackContext,
    complete_forward,
    dns_switched_back,
    goal_from_journal,
    list_failback,
    undo_before_dns,
)
from drills.takeover.steps.phases import PhaseContext
from drills.takeover.timeline import utc_now
from drills.targets.dns import normalize_value

log = logging.getLogger("drills.takeover.failback")


class NotServingFromDrError(RunRefused):
    """A failback asked for while the plan does not serve from DR."""


def not_serving_from_dr(plan_name: str, where: str) -> str:
    """Why a failback is refused: the plan does not serve from DR."""
    return (
        f"plan {plan_name} does not serve from DR (it serves from {where}): a "
        "failback only brings production home after an incident; see `drills status`"
    )


def incident_goal(history: Any, incident: DrillRun, ctx: PhaseContext) -> Snapshot:
    """The state before the incident: its snapshot, or (an incident recorded before
    incidents kept one) the originals of its journal over the state now."""
    if incident.details.snapshot_before:
        return dict(incident.details.snapshot_before)
    now = take(ctx.plan, ctx.targets)
    return goal_from_journal(now, Journal(history, incident.id).changes())


def close_incident(
    history: Any,
    plan: DrillPlan,
    incident_id: str,
    *,
    by: str,
    run_id: str | None,
    record: FailbackRecord | None = None,
    drift: bool = False,
) -> IncidentLink:
    """The incident record ends here: closed on the incident's run, and announced. Returns
    the link for the failback run that closed it (``run_id``) to keep in its details."""
    closed_at = utc_now()
    incident = history.get_run(incident_id)
    if incident is not None:
        link = (incident.details.incident or IncidentLink()).model_copy(
            update={"failback_run": run_id, "closed_at": closed_at, "closed_by": by}
        )
        details = incident.details.model_copy(update={"incident": link})
        history.update_run(incident_id, details=details)
    announce_incident_closed(plan, incident_id, by=by, run_id=run_id, record=record, drift=drift)
    return IncidentLink(incident_run=incident_id, closed_at=closed_at, closed_by=by)


class Failback(Drill):
    """The failback run; ``request.mode`` must be ``failback``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.request.mode != Mode.FAILBACK:
            raise DrillError(f"a failback run needs mode failback, not {self.request.mode}")
        self.incident: DrillRun | None = None

    # -- the run ---------------------------------------------------------------
    def run(self) -> DrillResult:
        self._follow_incident()
        return super().run()

    def preview(self) -> list[PlannedChange]:
        self._follow_incident()
        return super().preview()

    def _follow_incident(self) -> None:
        """A failback brings home what its incident took over: when that was one
        application (`--only`), the failback is of the same application's view, its lease
        and its targets, and ends in the state its incident started from."""
        incident = open_incident(self.history, self.plan.name)
        application = incident.details.application if incident else None
        if application and self.plan.application != application:
            self.plan = only_applications(self.plan.whole, application)
            self.details.application = application

    def _run(self) -> DrillResult:
        self.incident = self._open_incident()
        self.details.incident = IncidentLink(incident_run=self.incident.id)
        return super()._run()

    def _open_incident(self) -> DrillRun:
        incident = open_incident(self.history, self.plan.name)
        if incident is None:
            where = recorded_serving(self.history, self.plan.name).site
            raise NotServingFromDrError(not_serving_from_dr(self.plan.name, where))
        return incident

    def _planned(self, preview: PhaseContext) -> list[PlannedChange]:
        incident = self._open_incident()
        fctx = FailbackContext.of(preview, incident_t0=incident.t0)
        fctx.goal = incident_goal(self.history, incident, fctx)
        return list_failback(fctx, "preview")

    def _run_phases(self, ctx: PhaseContext) -> DrillResult:
        assert self.incident is not None
        fctx = FailbackContext.of(
            ctx, incident_t0=self.incident.t0, sync_deadline_s=self.request.sync_deadline_s
        )
        before: Snapshot = {}
        try:
            before = self._prepare_failback(fctx)
            approve(self.request, self.hooks, self.timeline, self.details)
            if self.request.dry_run:
                return self.ending.result(
                    RunStatus.DRY_RUN, None, planned=list_failback(fctx, "dry-run")
                )
            self._confirm_failback(fctx)
            return self._fail_back(fctx)
        except (DrillAborted, RunRefused) as exc:
            return self.ending.result(RunStatus.ABORTED, None, error=str(exc))
        except KeyboardInterrupt as exc:
            return self._stopped(fctx, before, RunStatus.CANCELLED, str(exc) or "cancelled")
        except (DrillError, Exception) as exc:
            error = str(exc) if isinstance(exc, DrillError) else f"{type(exc).__name__}: {exc}"
            log.error("failback %s failed: %s", self.run_id, error, exc_info=True)
            return self._stopped(fctx, before, RunStatus.ROLLED_BACK, error)

    def _prepare_failback(self, ctx: FailbackContext) -> Snapshot:
        """The preflight (nothing changes), then the state to return to on a failure,
        stored before the first change, and the state to end in: the incident's."""
        with self.timeline.phase("preflight"):
            self._dns_answers_dr(ctx)
            self._sites_distinct(ctx)
            self._way_back(ctx)
        assert self.incident is not None
        ctx.goal = incident_goal(self.history, self.incident, ctx)
        before = take(self.plan, ctx.targets)
        self.details.snapshot_before = before
        self.recorder.update_now(details=self.details)
        return before

    def _dns_answers_dr(self, ctx: FailbackContext) -> None:
        dns = self.plan.dns
        with self.timeline.step("DNS answers DR") as step:
            answers = ctx.targets.dns.read(dns.record.name, str(dns.record.type))
            values = sorted({v for a in answers for v in a.values})
            step.evidence = {"values": values}
            wanted = normalize_value(str(dns.record.type), dns.dr_value)
            if values != [wanted]:
                step.result = "refused"
                raise RunRefused(
                    f"preflight: {dns.record.name} answers {', '.join(values) or 'nothing'}, "
                    f"not DR's {wanted}: the record was changed outside drills; see `drills "
                    "status` and set it right before failing back"
                )
            step.result = f"{dns.record.name} → {wanted}"

    def _sites_distinct(self, ctx: FailbackContext) -> None:
        with self.timeline.step("primary and DR are distinct") as step:
            checked = distinct_result(self.preflight.distinct(ctx))
            step.result = f"{checked.status}: {checked.summary}" if checked else "not checked"
            if checked is not None and checked.status is Status.FAIL:
                raise RunRefused(f"preflight: {checked.summary}. {checked.remediation}")

    def _way_back(self, ctx: FailbackContext) -> None:
        with self.timeline.step("way-back readiness") as step:
            self.readiness = run_wayback(self.plan, history=self.history)
            blocking = self.readiness.blocking
            step.evidence = {
                "blocking": [r.id for r in blocking],
                "checks": len(self.readiness.results),
            }
            self.recorder.update_now(readiness=self.readiness.to_json())
            if blocking:
                step.result = f"blocked by {', '.join(r.id for r in blocking)}"
                raise DrillAborted(
                    "preflight: the way back is not ready: "
                    + "; ".join(f"{r.id}: {r.summary}" for r in blocking)
                )
            step.result = f"{len(self.readiness.results)} checks, none blocking"

    def _confirm_failback(self, ctx: FailbackContext) -> None:
        if self.hooks.confirm is None:
            return
        preview = FailbackContext.of(
            self._preview_context(ctx.targets), goal=ctx.goal, incident_t0=ctx.incident_t0
        )
        if not self.hooks.confirm(list_failback(preview, "preview")):
            raise DrillAborted("the operator did not confirm the changes")

    def _fail_back(self, ctx: FailbackContext) -> DrillResult:
        for phase in BEFORE_DNS:
            self._phase(phase.name, partial(phase.run, ctx))
            if self.t0 is None and "writers_stopped_at" in ctx.facts:
                self.t0 = ctx.facts["writers_stopped_at"]
                self.recorder.update_now(t0=self.t0)
        self._phase(DNS_BACK.name, partial(DNS_BACK.run, ctx))
        restored = self._phase(AFTER_DNS[0].name, partial(AFTER_DNS[0].run, ctx))
        for phase in AFTER_DNS[1:]:
            self._phase(phase.name, partial(phase.run, ctx))
        assert isinstance(restored, dt.datetime)
        return self._ended(ctx, restored)

    def _ended(
        self, ctx: FailbackContext, restored: dt.datetime, error: str | None = None
    ) -> DrillResult:
        drift = self.ending.verify(ctx, ctx.goal, "verify: the state before the incident")
        record = self._measure_failback(ctx, restored)
        status = RunStatus.SUCCEEDED if not drift else RunStatus.FAILBACK_DRIFT
        result = self.ending.result(status, None, drift=drift, error=error)
        if record.downtime_seconds is not None and status == RunStatus.SUCCEEDED:
            met = record.downtime_seconds <= self.plan.objectives.rto
            result.verdict = Verdict.MET if met else Verdict.MISSED
        assert self.incident is not None
        self.details.incident = close_incident(
            self.history, self.plan, self.incident.id, by="failback", run_id=self.run_id,
            record=record, drift=bool(drift),
        )  # fmt: skip
        return result

    def _measure_failback(self, ctx: FailbackContext, restored: dt.datetime) -> FailbackRecord:
        t0 = ctx.facts.get("writers_stopped_at")
        with self.timeline.phase("measure"), self.timeline.step("downtime and data") as step:
            record = FailbackRecord(
                t0=t0,
                dns_switched=ctx.facts.get("dns_switched_at"),
                restored=restored,
                downtime_seconds=round((restored - t0).total_seconds(), 3) if t0 else None,
                datasets=ctx.facts.get("datasets", []),
            )
            step.evidence = record.model_dump(mode="json")
            step.result = (
                f"downtime {record.downtime_seconds}s from the DR writers' stop; "
                f"{sum(d.written_at_dr for d in record.datasets)} object(s) written at DR, "
                "all readable at the primary"
            )
        self.details.failback = record
        self.recorder.update_now(restored_at=restored)
        return record

    # -- a failure or a cancel ---------------------------------------------------
    def _stopped(
        self, ctx: FailbackContext, before: Snapshot, status: RunStatus, error: str
    ) -> DrillResult:
        self.ending.stopping = error
        if dns_switched_back(self.journal.changes()):
            return self._forward(ctx, error)
        if not self.journal.to_undo():  # stopped before its first change
            failed = RunStatus.FAILED if status == RunStatus.ROLLED_BACK else status
            return self.ending.result(failed, None, error=error)
        try:
            with self.timeline.phase("rollback"):
                undo_before_dns(ctx.executor, ctx, self.timeline)
            drift = self.ending.verify(ctx, before, "verify: serving from DR as before")
        except DrillError as exc:
            return self.ending.result(
                RunStatus.ROLLBACK_FAILED, None, drift=None, error=f"{error}; undo: {exc}"
            )
        return self.ending.result(
            status if not drift else RunStatus.ROLLBACK_FAILED, None, drift=drift, error=error
        )

    def _forward(self, ctx: FailbackContext, error: str) -> DrillResult:
        """After the DNS switch there is no way back but forward: finish the failback."""
        try:
            with self.timeline.phase("complete forward"):
                restored = complete_forward(ctx)
            return self._ended(ctx, restored, error=f"{error}; after the DNS switch: completed")
        except (DrillError, Exception) as exc:  # noqa: BLE001 - reported, left to recover
            return self.ending.result(
                RunStatus.FAILED, None,
                error=f"{error}; completing after the DNS switch: {exc}. `drills recover "
                f"{self.run_id}` completes the failback.",
            )  # fmt: skip

    def _left_part_way(self, result: DrillResult) -> bool:
        """A failback that ended (even with drift) or was undone is finished; one whose
        undo failed, or that stopped after its DNS switch, waits for `drills recover`."""
        if result.status in (RunStatus.SUCCEEDED, RunStatus.FAILBACK_DRIFT, RunStatus.DRY_RUN):
            return False
        return result.status == RunStatus.ROLLBACK_FAILED or bool(self.journal.to_undo())


__all__ = ["Failback", "NotServingFromDrError", "close_incident", "incident_goal"]
