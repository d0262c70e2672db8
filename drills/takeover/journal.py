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
from typing import Any

from drills.store import journal as rows
from drills.store.history import HistoryStore
from drills.store.journal import Change
from drills.store.kinds import EntryState


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
        with self._lock:
            return rows.record_next(self.store, self.run_id, kind, target, original, intended, now)

    def mark(self, seq: int, state: EntryState) -> None:
        rows.write_state(self.store, self.run_id, seq, state, dt.datetime.now(dt.UTC))

    def changes(self) -> list[Change]:
        return rows.changes(self.store, self.run_id)

    def to_undo(self) -> list[Change]:
        """Applied or possibly applied changes, newest first: the order to roll back in."""
        return [c for c in reversed(self.changes()) if c.needs_undo]


__all__ = ["Change", "Journal"]
