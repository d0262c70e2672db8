"""`drills recover`: finish the job of a run that died, from its journal alone.

Drill mode: undo every applied or possibly applied change in the safe order
(DNS back, DR to standby and verified not serving, then the primary), then
compare the state with the snapshot the run stored before its first change.

Incident mode: never fail back on its own. It reports the journal and the
current state, then does what the operator chose:
- ``complete``: walk the takeover again (fence, bring up, DNS), then smoke. The RTO is
  recorded from the incident's own T0: the outage lasted since it was declared.
  Changes already made are skipped by the executor, so this is idempotent.
- ``hold``: keep what was done, finish only the fence (the primary closed and
  verified from outside, so both sites can never serve), and settle the
  entries a crash left pending. DR stays as it is, for a person to look at.

Failback mode: before its DNS switch it is undone (DR serves exactly as before it,
verified against the snapshot it took); after it, it is completed forward and
verified against the state before the incident, which it then closes.

``fail-back`` (`drills recover RUN --fail-back`) abandons an incident declared by
mistake and stopped part-way before its DNS switch: explicit, audited, it undoes the
incident's journal in the safe order (DNS back, DR to standby verified, the primary
reopened) and compares with the snapshot taken before the incident (or, without one,
the originals of its journal). It stops no DR writer and syncs nothing back, so once
the switch was made (or possibly made), or a recover completed the incident, it is
refused: DR may hold writes, and only a failback run brings them home.

The run is marked ``recovered`` (finished) or ``recover-failed`` (left
unfinished, so no new drill starts on top of it). Running it again is safe:
every step reads the current state first and writes only what differs.
"""

from __future__ import annotations

import logging
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from drills.checks.runner import ReadinessReport
from drills.errors import DrillError, RunRefused
from drills.plan import DrillPlan, load_plan
from drills.plan.claims import plan_claims
from drills.plan.only import UnknownApplicationError, only_applications
from drills.store.details import RecoverAttempt, RunDetails
from drills.store.history import HistoryStore
from drills.store.kinds import EntryState, Mode, RunStatus, Verdict
from drills.store.models import DrillRun
from drills.takeover.failback import close_incident
from drills.takeover.journal import Journal
from drills.takeover.lease import LeaseHeldError, PlanLease
from drills.takeover.lost_changes import journal_lost_changes
from drills.takeover.measure import Measurement, measure_facts
from drills.takeover.recover_failback import failback_action, recover_failback
from drills.takeover.recover_report import (
    RECOVER_ROLE,
    Action,
    RecoverBusyError,
    RecoverError,
    RecoverReport,
    RecoverStatus,
)
from drills.takeover.snapshot import differences, take
from drills.takeover.steps.changes import KINDS
from drills.takeover.steps.executor import ChangeExecutor
from drills.takeover.steps.failback import goal_from_journal
from drills.takeover.steps.phases import PhaseContext
from drills.takeover.steps.rollback import safe_rollback, wait_primary_serves
from drills.takeover.steps.sequence import resume
from drills.takeover.timeline import utc_now
from drills.takeover.write_ahead import replay_left, state_dir
from drills.targets.sites import Targets

log = logging.getLogger("drills.takeover.recover")

AUDIT_FAIL_BACK = "recover-fail-back"


def pick_run(history: HistoryStore, run_id: str | None, plan: str | None) -> DrillRun:
    """The run by id (or unique prefix), or the newest unfinished run of a plan.

    Never a dry run, nor a run that finished by itself: only one left unfinished, or one
    a recover finished (an incident held may be completed later). What runs on this machine
    left in their write-ahead files during a store outage is written back first.
    """
    replay_left(history, state_dir(history.url))
    if run_id:
        run = history.find_run(run_id)
        if run is None:
            raise RecoverError(
                f"no run {run_id!r} (or the prefix is ambiguous); see `drills history`"
            )
        if run.dry_run:
            raise RecoverError(f"run {run.id} is a dry run: it changed nothing to recover")
        if run.finished_at is not None and run.status != RunStatus.RECOVERED:
            # Its history is the record of what happened: a recover must not rewrite it.
            # One a recover finished may be taken up again (an incident held, then completed).
            raise RecoverError(
                f"run {run.id} finished ({run.status}) at {run.finished_at.isoformat()}: "
                "nothing to recover"
            )
        return run
    if not plan:
        raise RecoverError("name a run id, or --plan for its newest unfinished run")
    unfinished = [r for r in history.unfinished_runs(plan) if not r.dry_run]
    if not unfinished:
        raise RecoverError(f"plan {plan} has no unfinished run: nothing to recover")
    return unfinished[0]


def plan_of(run: DrillRun, path: Path | None = None) -> DrillPlan:
    """The plan to reach the run's targets: the file given, or the one the run recorded."""
    recorded = run.details.plan_path
    source = path or (Path(recorded) if recorded else None)
    if source is None:
        raise RecoverError(f"run {run.id} did not record its plan file; give it with --plan-file")
    plan = load_plan(source)
    if plan.name != run.plan:
        raise RecoverError(f"{source} is plan {plan.name}, but run {run.id} is of plan {run.plan}")
    try:  # a run of one application is recovered as it ran: over that application's view
        return only_applications(plan, run.details.application)
    except UnknownApplicationError as gone:
        raise RecoverError(
            f"run {run.id} ran application {run.details.application}, but "
            f"{gone}; give the plan file it ran with (--plan-file)"
        ) from None


def recover_run(
    history: HistoryStore,
    plan: DrillPlan,
    run: DrillRun,
    *,
    action: Action | None = None,
    force_unfenced: bool = False,
    deadline_s: float = 120.0,
    operator: str = "",
    reason: str = "",
) -> RecoverReport:
    """Recover ``run``; in incident mode ``action`` None only reports."""
    journal = Journal(history, run.id)
    if action == "fail-back" and not (operator.strip() and reason.strip()):
        raise RecoverError("--fail-back abandons an incident: name the --operator and a --reason")
    try:
        action = _choose(run, action, journal)
    except RunRefused as refused:  # an abandon refused is audited as one that ran
        history.audit(
            who=operator, action=AUDIT_FAIL_BACK, plan=plan.name, accepted=False,
            reason=reason, detail={"run_id": run.id, "refused": str(refused)},
        )  # fmt: skip
        raise
    # The lease keeps a new drill (or a second recover) off the plan meanwhile; a crashed
    # holder on this host is taken over at once, one elsewhere once its lease expires.
    # The targets the run touched are leased too: another plan's takeover stays off them
    # until this run is recovered.
    claims = plan_claims(plan, practice=run.mode == Mode.PRACTICE)
    with ExitStack() as held:
        try:
            held.enter_context(PlanLease(history, plan.lease_name, run.id, claims=claims,
                                         role=RECOVER_ROLE))  # fmt: skip
        except LeaseHeldError as busy:
            if busy.run_id == run.id and type(busy) is LeaseHeldError:  # held for this run
                raise RecoverBusyError(run, busy) from None  # the loser names the winner
            raise
        targets = held.enter_context(Targets(plan))
        report = RecoverReport(
            run.id, plan.name, run.mode, action, RecoverStatus.NEEDS_DECISION,
            [entry.to_json() for entry in history.journal(run.id)], take(plan, targets),
        )  # fmt: skip
        if action is None:
            return report
        executor = ChangeExecutor(targets, journal, undo_expected=run.mode != Mode.INCIDENT)
        try:
            with report.timeline.phase(f"recover: {action}"):
                if run.mode == Mode.FAILBACK:
                    recover_failback(history, report, executor, run, deadline_s)
                elif action in ("rollback", "fail-back"):
                    _roll_back(report, executor, plan, run, deadline_s)
                else:
                    _take_over(report, executor, plan, run, action, force_unfenced, deadline_s)
            report.status = (
                RecoverStatus.RECOVERED if not report.drift else RecoverStatus.RECOVER_FAILED
            )
        except DrillError as exc:
            report.status, report.error = RecoverStatus.RECOVER_FAILED, str(exc)
            log.error("recover of run %s failed: %s", run.id, exc)
        report.state = take(plan, targets)
        # Recorded while the leases are held: a run recovered gives its targets back with
        # them; one still unfinished keeps them (PlanLease).
        _record(history, run, report)
    if action == "fail-back":
        _abandoned(history, plan, run, report, operator, reason)
    return report


def _choose(run: DrillRun, action: Action | None, journal: Journal) -> Action | None:
    """The action a run's mode allows: a drill rolls back; an incident completes, holds
    or (explicitly) fails back; a failback follows its DNS switch."""
    if Mode(run.mode).rehearsal:  # a run made in code may hold the plain word
        if action not in (None, "rollback"):
            raise RecoverError(
                f"a {run.mode} is always rolled back; --complete/--hold are for incidents"
            )
        return "rollback"
    if run.mode == Mode.FAILBACK:
        return failback_action(action, journal)
    if action == "rollback":
        raise RecoverError(
            "an incident is never rolled back by recover: use --complete or --hold, or "
            "--fail-back to abandon one declared by mistake"
        )
    if action == "fail-back":
        _refuse_fail_back_after_dns(run, journal)
    return action


def _refuse_fail_back_after_dns(run: DrillRun, journal: Journal) -> None:
    """--fail-back undoes an incident without stopping DR's writers or syncing their data
    back: only safe while clients never reached DR. Once its DNS switch was made (or
    possibly made), or a recover completed it, DR may hold writes: the way home is then
    a failback run, with its final sync."""
    switched = any(c.kind == "dns.record" and c.needs_undo for c in journal.changes())
    completed = any(
        a.action == "complete" and a.status == RunStatus.RECOVERED for a in run.details.recover
    )
    if switched or completed:
        why = "switched DNS to DR" if switched else "was completed by `drills recover`"
        plan_file = run.details.plan_path or "PLAN"
        raise RunRefused(
            f"incident {run.id} {why}, so DR may hold writes that --fail-back would lose: "
            f"`drills recover {run.id} --complete`, then `drills run {plan_file} --mode "
            "failback` brings production home with its data"
        )


def _abandoned(
    history: HistoryStore,
    plan: DrillPlan,
    run: DrillRun,
    report: RecoverReport,
    operator: str,
    reason: str,
) -> None:
    """Audit the abandon, and close the incident when production is home again."""
    done = report.status == RecoverStatus.RECOVERED
    history.audit(
        who=operator, action=AUDIT_FAIL_BACK, plan=plan.name, accepted=done, reason=reason,
        detail={"run_id": run.id, "status": str(report.status), "undone": report.undone,
                "error": report.error},
    )  # fmt: skip
    if done:
        close_incident(history, plan, run.id, by="recover --fail-back", run_id=None)


def _roll_back(
    report: RecoverReport,
    executor: ChangeExecutor,
    plan: DrillPlan,
    run: DrillRun,
    deadline_s: float,
) -> None:
    _fill_from_snapshot(report, executor, plan, run)
    undone = safe_rollback(executor, plan, report.timeline, deadline_s=deadline_s)
    report.undone = [c.target for c in undone]
    wait_primary_serves(plan, report.timeline, deadline_s=deadline_s)
    with report.timeline.step("compare with the state before the run") as step:
        now = take(plan, executor.targets)
        before, against = _state_before(run, executor.journal, now)
        if before is None:
            step.result = "the run stopped before its first change"
            return
        report.drift = differences(before, now)
        step.evidence = {"against": against, "differences": report.drift}
        step.result = "identical" if not report.drift else f"{len(report.drift)} difference(s)"


def _fill_from_snapshot(
    report: RecoverReport, executor: ChangeExecutor, plan: DrillPlan, run: DrillRun
) -> None:
    """A journal that lost its last entries (a store that did not make its commits
    durable) is completed from the snapshot before the run, and the report says so."""
    before = run.details.snapshot_before
    if not before:
        return
    with report.timeline.step("journal against the snapshot before the run") as step:
        report.from_snapshot = journal_lost_changes(plan, executor.journal, executor.targets,
                                                    before)  # fmt: skip
        step.evidence = {"not_in_journal": report.from_snapshot}
        step.result = "complete" if not report.from_snapshot else _incomplete(report)
    if report.from_snapshot:
        log.warning("run %s: %s", run.id, _incomplete(report))


def _incomplete(report: RecoverReport) -> str:
    return (
        f"the journal is incomplete: {len(report.from_snapshot)} change(s) not in it "
        f"({', '.join(report.from_snapshot)}); undone from the snapshot before the run"
    )


def _state_before(
    run: DrillRun, journal: Journal, now: dict[str, Any]
) -> tuple[dict[str, Any] | None, str]:
    """What the rollback must have restored: the snapshot the run stored before its first
    change or, when it kept none (an incident whose snapshot took too long), the originals
    of its journal. None when it changed nothing: every entry, undone ones too (a recover
    run again), counts, but a write that failed and left its target as it was."""
    if run.details.snapshot_before is not None:
        return run.details.snapshot_before, "the snapshot before the run"
    made = [c for c in journal.changes() if c.state != EntryState.FAILED]
    if not made:
        return None, "nothing: no change was made"
    return goal_from_journal(now, made), "the originals of the journal (no snapshot was kept)"


def _take_over(
    report: RecoverReport,
    executor: ChangeExecutor,
    plan: DrillPlan,
    run: DrillRun,
    action: Action,
    force_unfenced: bool,
    deadline_s: float,
) -> None:
    ctx = PhaseContext(
        plan,
        executor.targets,
        executor,
        report.timeline,
        force_unfenced=force_unfenced,
        incident=True,
        tier_deadline_s=deadline_s,
        fence_deadline_s=deadline_s,
        dns_deadline_s=deadline_s,
    )
    resume(ctx, complete=action == "complete")
    _settle_pending(executor)
    if action == "complete":
        report.measurement = _measured(plan, run, ctx.facts)


def _measured(plan: DrillPlan, run: DrillRun, facts: dict[str, Any]) -> Measurement | None:
    """The RTO of an incident completed by recover, from the T0 it was declared at: the
    outage lasted since then, whoever finished the takeover."""
    restored = facts.get("restored_at")
    if run.t0 is None or restored is None:
        return None
    readiness = ReadinessReport.from_json(run.readiness) if run.readiness else None
    return measure_facts(plan, run.t0, facts, readiness)


def _settle_pending(executor: ChangeExecutor) -> None:
    """A crash between journal and write leaves ``pending``: record what really happened."""
    for change in executor.journal.changes():
        if change.state != EntryState.PENDING:
            continue
        now = KINDS[change.kind].read(executor.targets, change.target)
        if {k: now.get(k) for k in change.intended} == change.intended:
            executor.journal.mark(change.seq, EntryState.APPLIED)
        elif now == change.original:
            executor.journal.mark(change.seq, EntryState.FAILED)


def _completed(details: RunDetails, m: Measurement | None) -> dict[str, Any]:
    """What an incident completed by recover records: its RTO from T0, and a stuck one
    marked completed (recover-orphans stops retrying it)."""
    if details.stuck is not None and details.stuck.completed_at is None:
        details.stuck = details.stuck.model_copy(update={"completed_at": utc_now()})
    if m is None:
        return {"details": details}
    details.measurement = m.record()
    return {
        "details": details, "restored_at": m.restored, "rto_seconds": m.rto_seconds,
        "client_rto_seconds": m.client_rto_seconds, "rpo_seconds": m.rpo_seconds,
        "preemption_seconds": m.preemption_seconds, "verdict": m.verdict,
    }  # fmt: skip


def _record(history: HistoryStore, run: DrillRun, report: RecoverReport) -> None:
    if report.status == RecoverStatus.NEEDS_DECISION:
        return
    status = RunStatus(report.status)
    attempt = RecoverAttempt(
        at=utc_now(), action=report.action, status=status, undone=report.undone,
        drift=report.drift, error=report.error, from_snapshot=report.from_snapshot,
    )  # fmt: skip
    # As it stands now: the recover may have written to it (a failback closing its incident).
    run = history.get_run(run.id) or run
    details = run.details.model_copy(update={"recover": [*run.details.recover, attempt]})
    fields: dict[str, Any] = {
        "status": status,
        "details": details,
        "timeline": list(run.timeline or []) + report.timeline.to_json(),
    }
    if status == RunStatus.RECOVERED:
        # A failed recover leaves the run unfinished: nothing new may start on top of it.
        fields["finished_at"] = utc_now()
        fields["verdict"] = run.verdict or Verdict.FAILED
        if report.action == "complete" and run.restored_at is None:
            fields["restored_at"] = utc_now()
        if report.action == "complete":
            fields.update(_completed(details, report.measurement))
    else:
        fields["error"] = report.error or f"state differs from before: {sorted(report.drift)}"
    history.update_run(run.id, **fields)
    log.warning("run %s: %s (%s)", run.id, report.status, report.action)


__all__ = [
    "Action",
    "RecoverBusyError",
    "RecoverError",
    "RecoverReport",
    "RecoverStatus",
    "pick_run",
    "plan_of",
    "recover_run",
]
