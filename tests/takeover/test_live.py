"""The live timeline: a store error never replaces a phase's own, and nothing is written
after close (the run's final record must be the last word)."""

from __future__ import annotations

from pathlib import Path

import pytest

from drills.store.history import HistoryStore
from drills.takeover.live import LiveTimeline
from drills.takeover.timeline import Timeline


class BrokenStore(HistoryStore):
    def update_run(self, run_id: str, **fields: object) -> None:
        raise RuntimeError("the store is down")


def test_a_store_error_at_a_phase_end_does_not_replace_the_phase_error(tmp_path: Path) -> None:
    store = BrokenStore(f"sqlite:///{tmp_path / 'history.db'}")
    live = LiveTimeline(store, "run-1", Timeline())
    with pytest.raises(ValueError, match="the phase's own"):
        try:
            raise ValueError("the phase's own error")
        finally:
            live.write_now()  # logged, not raised
    live.close()


def test_nothing_is_written_after_close(tmp_path: Path) -> None:
    writes: list[str] = []

    class CountingStore(HistoryStore):
        def update_run(self, run_id: str, **fields: object) -> None:
            writes.append(run_id)

    live = LiveTimeline(CountingStore(f"sqlite:///{tmp_path / 'h.db'}"), "run-1", Timeline())
    live.write_soon()
    live.write_now()
    live.close()
    written = len(writes)
    assert written >= 1
    live.write_soon()
    live.write_now()
    assert len(writes) == written
