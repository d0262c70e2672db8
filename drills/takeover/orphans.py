"""Runs whose orchestrator died: found by their lease, recovered without a person.

A run holds its plan's lease while it lives and renews it every RENEW_S (a third of a
short lease); a worker killed with its flow run stops renewing, so the lease expires at
most LEASE_S after the last renewal. An unfinished run whose plan lease is gone, expired,
held by a dead process of this host, or held for another run is an orphan. Expiry is
judged by the database's clock, the one the lease was written with, so hosts whose clocks
disagree never take a live run for a dead one. The recover-orphans deployment
(flows/recover_orphans.py) looks every ORPHAN_SCAN_S, so an orphan is recovered within
LEASE_S + ORPHAN_SCAN_S (two lease periods) of its death, plus the time a worker takes to
start the flow run.

- A drill is rolled back (`drills recover`): the systems as the snapshot before it.
- An incident is never failed back: it is held (the fence finished, DR kept as it is, an
  incident declared with --force-unfenced held so too), and people are told to decide.
- A stuck incident (one whose deadline passed part-way, drills.takeover.stuck) is no run
  left for a person: its completion is retried at every scan until it is done, and people
  are told it is still stuck, with its state, once per outcome.
- A failback is undone before its DNS switch (DR serves as before it) and completed
  after it (production home, the incident closed).

A run that stopped part-way by itself and left the decision to a person (an incident
cancelled after changes, a drill whose rollback failed) is no orphan: its
process did not die, and nothing here acts on it. People are told of an orphan once per
outcome (held, recover failed, skipped ...), not at every scan.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from drills.errors import DrillError
from drills.notify.runs import announce_finish, announce_orphan
from drills.plan import DrillPlan
from drills.store.clock import database_now
from drills.store.details import RunDetails
from drills.store.history import HistoryStore
from drills.store.kinds import Mode
from drills.store.leases import unfinished_runs_and_leases
from drills.store.models import DrillRun, Lease
from drills.takeover.lease import LEASE_S, holder_is_dead, run_lease
from drills.takeover.recover import Action, plan_of, recover_run
from drills.takeover.stuck import hold_stuck, is_stuck

log = logging.getLogger("drills.takeover.orphans")

ORPHAN_SCAN_S = LEASE_S  # how often the recover-orphans deployment looks (prefect.yaml)
ORPHAN_BOUND_S = LEASE_S + ORPHAN_SCAN_S  # documented: recovered within two lease periods


@dataclass(frozen=True)
class OrphanOutcome:
    run_id: str
    plan: str
    mode: Mode
    action: Action | None  # None: a failback not taken either way (skipped, say)
    status: str
    error: str | None = None

    def to_json(self) -> dict[str, str | None]:
        return {"run_id": self.run_id, "plan": self.plan, "mode": self.mode,
                "action": self.action, "status": self.status, "error": self.error}  # fmt: skip


def _lease_alive(lease: Lease | None, run: DrillRun, now: dt.datetime) -> bool:
    if lease is None or lease.run_id != run.id:
        # A live lease of another run (a recover at work) keeps us off too.
        return lease is not None and lease.expires_at > now
    return lease.expires_at > now and not holder_is_dead(lease.holder)


def orphans(history: HistoryStore, now: dt.datetime | None = None) -> list[DrillRun]:
    """Unfinished runs (not dry runs, nor left for a person) that no live holder renews,
    oldest first. ``now`` is the database's clock unless given."""
    now = now or database_now(history)
    runs, leases = unfinished_runs_and_leases(history)
    return [
        run
        for run in runs
        if not run.details.left_for_decision
        and not _lease_alive(leases.get(run_lease(run)), run, now)
    ]


def _action(run: DrillRun) -> Action | None:
    """A drill rolls back, an incident is held (a stuck one completed: it exists to restore
    service); a failback (None) goes the way its DNS switch decides: undone before it,
    completed after it."""
    if is_stuck(run):
        return "complete"
    return {Mode.DRILL: "rollback", Mode.PRACTICE: "rollback", Mode.FAILBACK: None}.get(
        run.mode, "hold"
    )


_WORDS = {
    "rollback": "rolled back",
    "complete": "stuck incident completed: DR serves",  # only a stuck incident completes
    "hold": "held at DR for a person to decide",
    None: "failback not recovered",
}
_FAILBACK_WORDS = {
    "rollback": "failback undone: DR serves as before it",
    "complete": "failback completed: production back at the primary",
}


def _words(run: DrillRun, action: Action | None) -> str:
    if run.mode == Mode.FAILBACK:
        return _FAILBACK_WORDS.get(str(action), _WORDS[None])
    return _WORDS.get(action, str(action))


def recover_orphan(history: HistoryStore, run: DrillRun) -> OrphanOutcome:
    """Roll a drill back, hold an incident, take a failback the way its DNS switch says;
    tell people of what came of it, once per outcome. Never raises for one run: the next
    scan tries again (a failed recover leaves the run unfinished)."""
    action = _action(run)
    plan: DrillPlan | None = None
    try:
        plan = plan_of(run)
    except DrillError as exc:
        log.error("orphaned run %s cannot be recovered: %s", run.id, exc)
        outcome = OrphanOutcome(run.id, run.plan, run.mode, action, "recover-failed", str(exc))
    else:
        outcome = _recover(history, plan, run, action)
    _announce_once(history, plan, run, outcome)
    return outcome


def _recover(
    history: HistoryStore, plan: DrillPlan, run: DrillRun, action: Action | None
) -> OrphanOutcome:
    # An incident declared with --force-unfenced is held so too: its primary may never
    # answer, and a hold that insists on seeing it fail would fail at every scan.
    unfenced = run.details.force_unfenced or run.details.unfenced
    try:
        report = recover_run(history, plan, run, action=action, force_unfenced=unfenced)
    except DrillError as exc:  # e.g. its lease taken meanwhile by someone else's recover
        log.warning("orphaned run %s not recovered now: %s", run.id, exc)
        return OrphanOutcome(run.id, run.plan, run.mode, action, "skipped", str(exc))
    return OrphanOutcome(run.id, run.plan, run.mode, report.action, str(report.status),
                         report.error)  # fmt: skip


def _announce_once(
    history: HistoryStore, plan: DrillPlan | None, run: DrillRun, outcome: OrphanOutcome
) -> None:
    """Tell people what came of the orphan, unless they were told this already."""
    stuck = is_stuck(run)  # as the scan found it: a stuck incident, retried
    words = f"{_words(run, outcome.action)} ({outcome.status})"
    if stuck and outcome.status != "recovered":
        words = "stuck incident not completed yet (retried every scan)"
    latest = history.get_run(run.id) or run  # as the recover left it
    if latest.details.orphan_announced == words:
        log.info("orphaned run %s: %s, as already announced", run.id, words)
        return
    details = latest.details.model_copy(update={"orphan_announced": words})
    if stuck and plan is not None:
        # A stuck incident: told as stuck again with its state now, or as finished.
        _announce_stuck_retry(plan, latest, details, outcome)
    else:
        announce_orphan(plan or run.plan, run.id, str(run.mode), words, outcome.error)
    history.update_run(run.id, details=details)


def _announce_stuck_retry(
    plan: DrillPlan, run: DrillRun, details: RunDetails, outcome: OrphanOutcome
) -> None:
    if outcome.status == "recovered":
        announce_finish(
            plan, run.id, str(run.mode), status=outcome.status, verdict=run.verdict,
            rto_s=run.rto_seconds, rpo_s=run.rpo_seconds or {}, error=None, dry_run=False,
        )  # fmt: skip
        return
    details.stuck = hold_stuck(plan, run.id, outcome.error or "not completed", retried=True)


def recover_orphans(history: HistoryStore) -> list[OrphanOutcome]:
    found = orphans(history)
    for run in found:
        log.warning("run %s of %s lost its orchestrator; recovering it", run.id, run.plan)
    return [recover_orphan(history, run) for run in found]


__all__ = [
    "ORPHAN_BOUND_S",
    "ORPHAN_SCAN_S",
    "OrphanOutcome",
    "orphans",
    "recover_orphan",
    "recover_orphans",
]
