"""The write-ahead journal of a drill: every change, its original state first.

A step records what it is about to change *before* it acts (state
``pending``), then marks the entry ``applied`` once the change is made, and
``undone`` when rolled back. A crash between the two leaves a ``pending``
entry: recovery treats it as possibly applied and undoes it, which is safe
because every undo restores the recorded original and is idempotent.

The run that makes the changes keeps its journal through a store outage
(drills.takeover.write_ahead); `drills recover` and readers use this one, on the store.
"""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from drills.store.chain import Sealer
from drills.store.history import HistoryStore
from drills.store.kinds import EntryState
from drills.store.models import JournalEntry


@dataclass(frozen=True)
class Change:
    """One journalled change, as recovery needs it: enough to undo with nothing else."""

    seq: int
    kind: str  # e.g. "workload.scale": picks the read and write that undo it
    target: str  # what it touches, e.g. "primary/Deployment/serving/llm-server"
    original: dict[str, Any]
    intended: dict[str, Any]
    state: EntryState

    @property
    def needs_undo(self) -> bool:
        return self.state.needs_undo


class Journal:
    def __init__(self, store: HistoryStore, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        # Steps of one tier run in parallel threads; sequence numbers must not collide.
        self._lock = threading.Lock()

    def record(
        self, kind: str, target: str, original: dict[str, Any], intended: dict[str, Any]
    ) -> int:
        """Write the original state down before acting; returns the entry's sequence number."""
        now = dt.datetime.now(dt.UTC)

        def write(s: Session, sealer: Sealer) -> int:
            last = s.scalar(
                select(func.max(JournalEntry.seq)).where(JournalEntry.run_id == self.run_id)
            )
            seq = (last or 0) + 1
            change = Change(seq, kind, target, original, intended, EntryState.PENDING)
            self.write_entry(s, sealer, change, now)
            return seq

        with self._lock:
            return self.store.write(write)

    def mark(self, seq: int, state: EntryState) -> None:
        now = dt.datetime.now(dt.UTC)
        self.store.write(lambda s, sealer: self.write_state(s, sealer, seq, state, now))

    def write_entry(self, s: Session, sealer: Sealer, change: Change, at: dt.datetime) -> None:
        """Add an entry, or make the one of its seq say the same (a write whose commit
        the store made but never confirmed, written again)."""
        entry = self.entry(s, change.seq)
        if entry is None:
            entry = JournalEntry(run_id=self.run_id, seq=change.seq, created_at=at)
            s.add(entry)
        entry.kind, entry.target, entry.state = change.kind, change.target, change.state
        entry.original, entry.intended, entry.updated_at = change.original, change.intended, at
        s.flush()
        sealer.seal_journal(self.run_id, change.seq)  # in the chain before the change is made

    def write_state(
        self, s: Session, sealer: Sealer, seq: int, state: EntryState, at: dt.datetime
    ) -> None:
        entry = self.entry(s, seq)
        if entry is None:
            raise KeyError(f"run {self.run_id} has no journal entry {seq}")
        entry.state = state
        entry.updated_at = at
        sealer.seal_journal(self.run_id, seq)  # each state is a link of its own

    def entry(self, s: Session, seq: int) -> JournalEntry | None:
        query = select(JournalEntry).where(
            JournalEntry.run_id == self.run_id, JournalEntry.seq == seq
        )
        return s.scalars(query).one_or_none()

    def changes(self) -> list[Change]:
        return [
            Change(e.seq, e.kind, e.target, e.original, e.intended, e.state)
            for e in self.store.journal(self.run_id)
        ]

    def to_undo(self) -> list[Change]:
        """Applied or possibly applied changes, newest first: the order to roll back in."""
        return [c for c in reversed(self.changes()) if c.needs_undo]
