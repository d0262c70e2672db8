"""The run's timeline in the history store as it happens: each step as it ends.

A phase's end is written at once (the next phase starts from a durable record). A
step's end is written soon, by a thread of its own, so that the takeover never waits
on the database between two steps: writes that pile up collapse into one of the
newest timeline. The dashboard's live view and `drills serve run` read it from there.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from drills.store.history import HistoryStore
from drills.takeover.timeline import Timeline

log = logging.getLogger("drills.takeover.live")

CLOSE_WAIT_S = 5.0


class LiveTimeline:
    def __init__(
        self,
        history: HistoryStore,
        run_id: str,
        timeline: Timeline,
        store_out: Callable[[], bool] = lambda: False,
    ) -> None:
        self.history = history
        # While the store is known not to answer, the live view waits: the final record
        # carries the whole timeline anyway, and a try would only hold up a phase.
        self.store_out = store_out
        self.run_id = run_id
        self.timeline = timeline
        self._lock = threading.Lock()  # one write at a time, each of the newest timeline
        self._starting = threading.Lock()  # the writer thread starts once, never after close
        self._due = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None

    def write_now(self) -> None:
        """Write the timeline now (a phase's end). Called from a phase's ``finally``: a store
        error here must never replace the phase's own exception, so it is logged instead."""
        try:
            self._write()
        except Exception:  # a live view that lags must never stop the takeover
            log.warning("run %s: live timeline not written", self.run_id, exc_info=True)

    def write_soon(self) -> None:
        # Not the write lock: a step never waits on the database.
        with self._starting:
            if self._closed:
                return
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name=f"live-timeline-{self.run_id}", daemon=True
                )
                self._thread.start()
        self._due.set()

    def close(self) -> None:
        """Stop writing; the run's final record carries the whole timeline anyway.

        Closed first, then the lock taken: a write under way ends before this returns, and
        none starts after, so no late write lands over the run's final record.
        """
        with self._starting:
            self._closed = True
            thread = self._thread
        self._due.set()
        with self._lock:
            pass  # a write under way has ended; any later one sees closed and writes nothing
        if thread is not None:
            thread.join(CLOSE_WAIT_S)

    def _write(self) -> None:
        with self._lock:
            if self._closed or self.store_out():
                return
            self.history.update_run(self.run_id, timeline=self.timeline.to_json())

    def _loop(self) -> None:
        while True:
            self._due.wait()
            if self._closed:
                return
            self._due.clear()
            self.write_now()
