"""The rows of a run's write-ahead journal (drills.takeover.journal says what they mean).

Every write here is one transaction that seals what it wrote in the evidence chain.
"""

from __future__ import annotations

import datetime as dt
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


def changes(store: HistoryStore, run_id: str) -> list[Change]:
    """A run's journal, in the order its changes were made."""
    return [
        Change(e.seq, e.kind, e.target, e.original, e.intended, e.state)
        for e in store.journal(run_id)
    ]


def record_next(
    store: HistoryStore,
    run_id: str,
    kind: str,
    target: str,
    original: dict[str, Any],
    intended: dict[str, Any],
    at: dt.datetime,
) -> int:
    """A pending entry after the run's last one; returns its sequence number."""

    def write(s: Session, sealer: Sealer) -> int:
        last = s.scalar(select(func.max(JournalEntry.seq)).where(JournalEntry.run_id == run_id))
        seq = (last or 0) + 1
        change = Change(seq, kind, target, original, intended, EntryState.PENDING)
        _write_entry(s, sealer, run_id, change, at)
        return seq

    return store.write(write)


def write_entry(store: HistoryStore, run_id: str, change: Change, at: dt.datetime) -> None:
    """Add an entry, or make the one of its seq say the same (a write whose commit the store
    made but never confirmed, written again)."""
    store.write(lambda s, sealer: _write_entry(s, sealer, run_id, change, at))


def write_state(
    store: HistoryStore, run_id: str, seq: int, state: EntryState, at: dt.datetime
) -> None:
    """A new state of an entry; KeyError when the run has no such entry."""
    store.write(lambda s, sealer: _write_state(s, sealer, run_id, seq, state, at))


def replay_entry(store: HistoryStore, run_id: str, change: Change, at: dt.datetime) -> None:
    """The entry, only if the store lacks it."""

    def write(s: Session, sealer: Sealer) -> None:
        if _entry(s, run_id, change.seq) is None:
            _write_entry(s, sealer, run_id, change, at)

    store.write(write)


def replay_state(
    store: HistoryStore, run_id: str, seq: int, state: EntryState, at: dt.datetime
) -> None:
    """The state, only if the store holds the entry in an older one: a state written since
    (by `drills recover`, say) is never written over."""

    def write(s: Session, sealer: Sealer) -> None:
        entry = _entry(s, run_id, seq)
        if entry is not None and entry.updated_at < at:
            _write_state(s, sealer, run_id, seq, state, at)

    store.write(write)


def _write_entry(s: Session, sealer: Sealer, run_id: str, change: Change, at: dt.datetime) -> None:
    entry = _entry(s, run_id, change.seq)
    if entry is None:
        entry = JournalEntry(run_id=run_id, seq=change.seq, created_at=at)
        s.add(entry)
    entry.kind, entry.target, entry.state = change.kind, change.target, change.state
    entry.original, entry.intended, entry.updated_at = change.original, change.intended, at
    s.flush()
    sealer.seal_journal(run_id, change.seq)  # in the chain before the change is made


def _write_state(
    s: Session, sealer: Sealer, run_id: str, seq: int, state: EntryState, at: dt.datetime
) -> None:
    entry = _entry(s, run_id, seq)
    if entry is None:
        raise KeyError(f"run {run_id} has no journal entry {seq}")
    entry.state = state
    entry.updated_at = at
    sealer.seal_journal(run_id, seq)  # each state is a link of its own


def _entry(s: Session, run_id: str, seq: int) -> JournalEntry | None:
    query = select(JournalEntry).where(JournalEntry.run_id == run_id, JournalEntry.seq == seq)
    return s.scalars(query).one_or_none()
