"""Changes a run made that its journal lost, found from the snapshot before the run.

A store that acknowledges commits it has not made durable (PostgreSQL with
``synchronous_commit=off``) can lose the last entries of a journal in a crash: the
changes were made, but nothing says so. Undoing the journal alone then leaves them (DR
serving, say), and the rollback waits for a state it cannot reach.

An address the run may touch that differs from the snapshot taken before the run, and
that no change still to undo in the journal explains, is such a change. It is journalled
again, with the snapshot's value as its original, so the one safe order of the rollback
undoes it with the others.
"""

from __future__ import annotations

from typing import Any

from drills.plan import DrillPlan
from drills.store.kinds import EntryState
from drills.takeover.journal import Journal
from drills.takeover.snapshot import touched
from drills.takeover.steps.changes import KINDS
from drills.targets.sites import Targets


def lost_changes(
    plan: DrillPlan, journal: Journal, targets: Targets, before: dict[str, Any]
) -> dict[str, tuple[str, Any, Any]]:
    """By address: (change kind, value before the run, value now) of every change the
    journal does not explain."""
    explained = {c.target for c in journal.changes() if c.needs_undo}
    found = {}
    for kind, address in touched(plan):
        if address in explained or address not in before:
            continue
        now = KINDS[kind].read(targets, address)
        if now != before[address]:
            found[address] = (kind, before[address], now)
    return found


def journal_lost_changes(
    plan: DrillPlan, journal: Journal, targets: Targets, before: dict[str, Any]
) -> list[str]:
    """Journal every lost change as applied, from the snapshot; returns their addresses."""
    lost = lost_changes(plan, journal, targets, before)
    for address, (kind, original, now) in lost.items():
        seq = journal.record(kind, address, original, now)
        journal.mark(seq, EntryState.APPLIED)
    return sorted(lost)


__all__ = ["journal_lost_changes", "lost_changes"]
