"""The store's own notes (the evidence_meta table): when something was last done, by key;
and a plan's newest checkpoint, read in a transaction of its own."""

from __future__ import annotations

from drills.store.checkpoints import Checkpoint, latest
from drills.store.history import HistoryStore
from drills.store.models import EvidenceMeta


def read_note(store: HistoryStore, key: str) -> str | None:
    with store.session() as s:
        note = s.get(EvidenceMeta, key)
        return None if note is None else note.value


def write_note(store: HistoryStore, key: str, value: str) -> None:
    """Keep ``value`` under ``key``, written over any before it."""
    with store.session() as s:
        s.merge(EvidenceMeta(key=key, value=value))


def newest_checkpoint(store: HistoryStore, plan: str) -> Checkpoint | None:
    with store.session() as s:
        return latest(s, plan)
