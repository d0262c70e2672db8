"""Runs whose orchestrator died: found by their lease, recovered without a person.

A run holds its plan's lease while it lives and renews it every RENEW_S (a third of a
short lease); a worker killed with its flow run stops renewing, so the lease expires at
most LEASE_S after the last renewal. An unfinished run whose plan lease is gone, expired,
held by a dead process of this host, or held for another run is an orphan. The
recover-orphans deployment (flows/recover_orphans.py) looks every ORPHAN_SCAN_S, so an
orphan is recovered within LEASE_S + ORPHAN_SCAN_S (two lease periods) of its death,
plus the time a worker takes to start the flow run.

- A drill is rolled back (`drills recover`): the systems as the snapshot before it.
- An incident is never failed back: it is held (the fence finished, DR kept as it is),
  and people are told to decide.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from sqlalchemy import select

from drills.errors import DrillError
from drills.notify.runs import announce_orphan
from drills.store.history import HistoryStore
from drills.store.kinds import Mode
from drills.store.models import DrillRun, Lease
from drills.takeover.lease import LEASE_S, holder_is_dead
from drills.takeover.recover import Action, plan_of, recover
from drills.takeover.timeline import utc_now

log = logging.getLogger("drills.takeover.orphans")

ORPHAN_SCAN_S = LEASE_S  # how often the recover-orphans deployment looks (prefect.yaml)
ORPHAN_BOUND_S = LEASE_S + ORPHAN_SCAN_S  # documented: recovered within two lease periods


@dataclass(frozen=True)
class OrphanOutcome:
    run_id: str
    plan: str
    mode: Mode
    action: Action
    status: str
    error: str | None = None

    def to_json(self) -> dict[str, str | None]:
        return {"run_id": self.run_id, "plan": self.plan, "mode": self.mode,
                "action": self.action, "status": self.status, "error": self.error}  # fmt: skip


def _lease_alive(lease: Lease | None, run: DrillRun, now: dt.datetime) -> bool:
    if lease is None or lease.run_id != run.id:
        # A live lease of another run (a recover already at work) keeps us off too.
        return lease is not None and lease.expires_at > now
    return lease.expires_at > now and not holder_is_dead(lease.holder)


def orphans(history: HistoryStore, now: dt.datetime | None = None) -> list[DrillRun]:
    """Unfinished runs (not dry runs) that no live holder renews, oldest first."""
    now = now or utc_now()
    with history.session() as s:
        runs = s.scalars(
            select(DrillRun)
            .where(DrillRun.finished_at.is_(None), DrillRun.dry_run.is_(False))
            .order_by(DrillRun.started_at)
        ).all()
        leases = {lease.plan: lease for lease in s.scalars(select(Lease)).all()}
    return [run for run in runs if not _lease_alive(leases.get(run.plan), run, now)]


def recover_orphan(history: HistoryStore, run: DrillRun) -> OrphanOutcome:
    """Roll a drill back, hold an incident; tell people either way. Never raises for one run:
    the next scan tries again (a failed recover leaves the run unfinished)."""
    action: Action = "rollback" if run.mode == Mode.DRILL else "hold"
    try:
        plan = plan_of(run)
    except DrillError as exc:
        log.error("orphaned run %s cannot be recovered: %s", run.id, exc)
        return OrphanOutcome(run.id, run.plan, run.mode, action, "recover-failed", str(exc))
    try:
        report = recover(history, plan, run, action=action)
        outcome = OrphanOutcome(run.id, run.plan, run.mode, action, str(report.status),
                                report.error)  # fmt: skip
    except DrillError as exc:  # e.g. its lease taken meanwhile by someone else's recover
        log.warning("orphaned run %s not recovered now: %s", run.id, exc)
        return OrphanOutcome(run.id, run.plan, run.mode, action, "skipped", str(exc))
    words = "rolled back" if action == "rollback" else "held at DR for a person to decide"
    announce_orphan(plan, run.id, str(run.mode), f"{words} ({outcome.status})", outcome.error)
    return outcome


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
