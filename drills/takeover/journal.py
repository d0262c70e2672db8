"""The write-ahead journal of a drill: every change, its original state first.

A step records what it is about to change *before* it acts (state
``pending``), then marks the entry ``applied`` once the change is made, and
``undone`` when rolled back. A crash between the two leaves a ``pending``
entry: recovery treats it as possibly applied and undoes it, which is safe
because every undo restores the recorded original and is idempotent.
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
            s.add(
                JournalEntry(
                    run_id=self.run_id,
                    seq=seq,
                    kind=kind,
                    target=target,
                    original=original,
                    intended=intended,
                    state=EntryState.PENDING,
                    created_at=now,
                    updated_at=now,
                )
            )
            sealer.seal_journal(self.run_id, seq)  # in the chain before the change is made
            return seq

        with self._lock:
            return self.store.write(write)

    def mark(self, seq: int, state: EntryState) -> None:
        def write(s: Session, sealer: Sealer) -> None:
            entry = s.scalars(
                select(JournalEntry).where(
                    JournalEntry.run_id == self.run_id, JournalEntry.seq == seq
                )
            ).one()
            entry.state = state
            entry.updated_at = dt.datetime.now(dt.UTC)
            sealer.seal_journal(self.run_id, seq)  # each state is a link of its own

        self.store.write(write)

    def changes(self) -> list[Change]:
        return [
            Change(e.seq, e.kind, e.target, e.original, e.intended, e.state)
            for e in self.store.journal(self.run_id)
        ]

    def to_undo(self) -> list[Change]:
        """Applied or possibly applied changes, newest first: the order to roll back in."""
        return [c for c in reversed(self.changes()) if c.needs_undo]
