"""A running takeover's writes to the history store, kept through a store outage.

The process that makes the changes keeps their journal in memory: its truth while it
runs, so a rollback never needs the store. Every entry and every new state is also
appended (and synced) to a local write-ahead file before the store is asked, then
written to the store in order. While the store does not answer (PostgreSQL stopped, a
full disk under SQLite), writes wait in order and a thread retries them every few
seconds, never holding up the run; when the store answers again, they are written back,
the run's record with them. A run that ends while the store is still out waits for it
(DrillRequest.store_wait_s); past that, it leaves its final status and error in the file
too, and the next `drills run` or `drills recover` on this machine writes them back.

Where the files are: ``DRILLS_STATE_DIR``, else beside a SQLite store's file, else
``.drills/`` in the working directory; one file a run, ``write-ahead/RUN.jsonl``, removed
once all of it is in the store. When the file cannot be written either (the same full
disk), the run goes on from memory and says so.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from drills.errors import DrillError, RunRefused
from drills.store import journal as rows
from drills.store.clock import database_now
from drills.store.details import RunDetails
from drills.store.history import HistoryStore
from drills.store.kinds import EntryState, RunStatus
from drills.store.outage import (
    is_store_outage,
    nondurable_allowed,
    nondurable_message,
    nondurable_settings,
    outage_text,
)
from drills.store.url import sqlite_path
from drills.takeover.journal import Change, Journal
from drills.takeover.lease import current, holder_is_dead, run_lease

log = logging.getLogger("drills.takeover.write_ahead")

STATE_DIR_ENV = "DRILLS_STATE_DIR"
RETRY_S = 2.0  # between two tries of a store that is out
Write = Callable[[], object]


class StoreUnavailable(DrillError):  # noqa: N818 - a state of the world, as the message says
    """The history store does not answer: a drill stops making changes and rolls back."""


def state_dir(store_url: str) -> Path:
    """Where a run keeps its write-ahead file: not inside the store it stands in for."""
    chosen = os.environ.get(STATE_DIR_ENV)
    if chosen:
        return Path(chosen)
    sqlite_file = sqlite_path(store_url)
    return Path(sqlite_file).parent if sqlite_file else Path(".drills")


def write_ahead_file(directory: Path, run_id: str) -> Path:
    return directory / "write-ahead" / f"{run_id}.jsonl"


class Backlog:
    """Writes to the store, in order; during an outage they wait and a thread retries."""

    def __init__(self, run_id: str, retry_s: float = RETRY_S) -> None:
        self.run_id = run_id
        self.retry_s = retry_s
        self.outage: str | None = None  # why the store last failed, while it is out
        # Each outage the run met and rode out: when, how long, why (for its record).
        self.met: list[str] = []
        self._out_since: tuple[dt.datetime, float] | None = None
        self._queue: deque[Write] = deque()
        self._queue_lock = threading.Lock()
        self._sending = threading.Lock()  # one sender at a time keeps the order
        self._closed = threading.Event()
        self._retrying: threading.Thread | None = None

    def submit(self, write: Write) -> None:
        """Queue a write and try it now, unless the store is known to be out (a retry
        thread is on it then: the run never waits on a store that does not answer)."""
        with self._queue_lock:
            self._queue.append(write)
        if self.outage is None:
            self.flush()

    def pending(self) -> int:
        with self._queue_lock:
            return len(self._queue)

    def flush(self) -> bool:
        """Send what waits, oldest first; True when nothing is left. A write that fails
        for another reason than an outage is a bug of ours: it is raised."""
        with self._sending:
            while True:
                with self._queue_lock:
                    if not self._queue:
                        break
                    write = self._queue[0]
                try:
                    write()
                except Exception as exc:
                    if not is_store_outage(exc):
                        raise
                    self._out(exc)
                    return False
                with self._queue_lock:
                    self._queue.popleft()
            if self.outage is not None:
                self._back()
            return True

    def drain(self, wait_s: float) -> bool:
        """Wait until every write is in the store, up to ``wait_s``; True when they are."""
        deadline = time.monotonic() + wait_s
        while not self.flush():
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(self.retry_s, max(0.0, deadline - time.monotonic())))
        return True

    def close(self) -> None:
        self._closed.set()
        if self._retrying is not None:
            self._retrying.join(self.retry_s + 1)

    def _out(self, exc: BaseException) -> None:
        first = self.outage is None
        self.outage = outage_text(exc)
        if not first:
            return
        self._out_since = (dt.datetime.now(dt.UTC), time.monotonic())
        log.error(
            "run %s: the history store does not answer (%s); %d write(s) kept, retried every "
            "%.0fs", self.run_id, self.outage, self.pending(), self.retry_s,
        )  # fmt: skip
        if self._retrying is None or not self._retrying.is_alive():
            self._retrying = threading.Thread(
                target=self._retry, name=f"store-retry-{self.run_id}", daemon=True
            )
            self._retrying.start()

    def _back(self) -> None:
        assert self._out_since is not None
        since, started = self._out_since
        lasted = time.monotonic() - started
        self.met.append(f"{since:%H:%M:%S} UTC for {lasted:.1f}s: {self.outage}")
        log.warning("run %s: the history store answers again after %.1fs; the run's writes "
                    "are back in it", self.run_id, lasted)  # fmt: skip
        self.outage = None

    def _retry(self) -> None:
        while not self._closed.wait(self.retry_s):
            try:
                if self.flush():
                    return
            except Exception:  # raised again, and recorded, by the run's own final flush
                log.error("run %s: a kept write failed", self.run_id, exc_info=True)
                return


class WriteAheadJournal(Journal):
    """The journal of the run this process makes: in memory, in a local file, in the store.

    ``halt`` says whether a store that does not answer stops the run (a drill going
    forward): then record and mark raise StoreUnavailable once the entry is kept, so the
    change is never made without it, and the rollback that follows has the entry.
    """

    def __init__(
        self,
        store: HistoryStore,
        run_id: str,
        backlog: Backlog,
        path: Path,
        halt: Callable[[], bool] = lambda: False,
    ) -> None:
        super().__init__(store, run_id)
        self.backlog = backlog
        self.path = path
        self.halt = halt
        self.file_error: str | None = None  # why the local file could not be written
        self._changes: dict[int, Change] = {}

    def record(
        self, kind: str, target: str, original: dict[str, Any], intended: dict[str, Any]
    ) -> int:
        with self._lock:
            seq = max(self._changes, default=0) + 1
            change = Change(seq, kind, target, original, intended, EntryState.PENDING)
            self._changes[seq] = change
        now = dt.datetime.now(dt.UTC)
        op = {"op": "record", "seq": seq, "kind": kind, "target": target, "original": original,
              "intended": intended, "at": now.isoformat()}  # fmt: skip
        write = partial(rows.write_entry, self.store, self.run_id, change, now)
        self._keep(op, write)
        return seq

    def mark(self, seq: int, state: EntryState) -> None:
        with self._lock:
            self._changes[seq] = replace(self._changes[seq], state=state)
        now = dt.datetime.now(dt.UTC)
        write = partial(rows.write_state, self.store, self.run_id, seq, state, now)
        self._keep({"op": "mark", "seq": seq, "state": str(state), "at": now.isoformat()}, write)

    def changes(self) -> list[Change]:
        with self._lock:
            return [self._changes[seq] for seq in sorted(self._changes)]

    def settle(
        self,
        details: RunDetails,
        status: RunStatus,
        error: str | None,
        *,
        finished: bool,
        wait_s: float,
    ) -> str | None:
        """After the run's final record is queued: wait up to ``wait_s`` for the store to
        take every write, then note the outages the run rode out in its details. Past the
        wait, leave the final status and error in the file, for the next drills on this
        machine to write back; returns what the run's error must then say."""
        try:
            if self.backlog.drain(wait_s):
                self.path.unlink(missing_ok=True)  # all in the store: the file did its job
                if self.backlog.met:  # its writes were late, not lost
                    details.store_outages = list(self.backlog.met)
                    self.store.update_run(self.run_id, details=details)
                return None
        finally:
            self.backlog.close()
        self._append({"op": "finish", "status": str(status), "error": error, "finished": finished})
        where = (
            f"it waits in {self.path}, written back by the next `drills run` or `drills "
            "recover` on this machine" if self.file_error is None
            else "and no local file could keep it"
        )  # fmt: skip
        return (
            f"the history store did not answer for {wait_s:.0f}s after the run ended "
            f"({self.backlog.outage}): its record is not in the store; {where}"
        )

    def _keep(self, op: dict[str, Any], write: Write) -> None:
        self._append(op)
        self.backlog.submit(write)
        if self.backlog.outage is not None and self.halt():
            raise StoreUnavailable(
                f"the history store does not answer ({self.backlog.outage}): no change is "
                "made without its journal in the store"
            )

    def _append(self, op: dict[str, Any]) -> None:
        line = json.dumps({"at": dt.datetime.now(dt.UTC).isoformat(), **op, "run_id": self.run_id})
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as out:
                out.write(line + "\n")
                out.flush()
                os.fsync(out.fileno())
        except OSError as exc:
            if self.file_error is None:
                log.error("run %s: cannot write its write-ahead file %s (%s); the journal is "
                          "kept in memory", self.run_id, self.path, exc)  # fmt: skip
            self.file_error = str(exc)


def refuse_nondurable(store: HistoryStore, *, incident: bool) -> None:
    """Before a takeover's first change: a store that may lose acknowledged commits is
    refused (RunRefused), unless explicitly allowed. An incident is never held up by it: it
    goes on, with the warning logged as an error (its journal is in its local file too)."""
    settings = nondurable_settings(store.engine)
    if not settings:
        return
    message = nondurable_message(settings)
    if nondurable_allowed():
        log.warning("%s (allowed)", message)
    elif incident:
        log.error("WARNING, the incident goes on: %s", message)
    else:
        raise RunRefused(message)


def replay_left(store: HistoryStore, directory: Path) -> list[str]:
    """Write back what runs on this machine left in their write-ahead files when the store
    was out as they ended (entries, states, the final status and error); returns the runs
    written back. A file the store still cannot take stays for the next time."""
    folder = directory / "write-ahead"
    done: list[str] = []
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        run_id = path.stem
        run = store.get_run(run_id)
        if run is None:
            continue  # another store's run: not ours to write
        with _claimed(path) as ops:
            if ops is None:
                continue  # another process on this machine is writing it back
            ended = any(op["op"] == "finish" for op in ops)
            if not ended and _still_running(store, run_lease(run), run_id):
                continue  # its own process keeps the file, and writes it back itself
            _replay(store, run_id, ops)
            path.unlink(missing_ok=True)
        done.append(run_id)
        log.warning("run %s: its write-ahead file was written back to the store", run_id)
    return done


@contextmanager
def _claimed(path: Path) -> Iterator[list[dict[str, Any]] | None]:
    """The file's entries, read under an exclusive lock that two recovers started together
    cannot both hold; None when the other holds it or has already written it back (the
    file is gone), as replaying it twice at once could write an entry twice."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        yield None
        return
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        # The other may have finished and removed it between our open and our lock.
        yield _read(path) if path.exists() else None


def _still_running(store: HistoryStore, plan: str, run_id: str) -> bool:
    """The run holds its plan's lease, renewed by a process that is alive."""
    held = current(store, plan)
    if held is None or held.run_id != run_id:
        return False
    return held.expires_at > database_now(store) and not holder_is_dead(held.holder)


def _read(path: Path) -> list[dict[str, Any]]:
    ops = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            ops.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by the crash that left the file
    return ops


def _replay(store: HistoryStore, run_id: str, ops: list[dict[str, Any]]) -> None:
    """Only what the store does not have yet: an entry it lacks, a state newer than the
    one it holds. A `drills recover` run elsewhere since then is never written over."""
    final: dict[str, Any] | None = None
    for op in ops:
        if op["op"] == "finish":
            final = op
        else:
            _replay_op(store, run_id, op, dt.datetime.fromisoformat(op["at"]))
    if final is not None:
        run = store.get_run(run_id)
        if run is not None and run.status == RunStatus.RUNNING:
            ended = dt.datetime.fromisoformat(final["at"]) if final["finished"] else None
            store.update_run(run_id, status=RunStatus(final["status"]), error=final["error"],
                             finished_at=ended)  # fmt: skip


def _replay_op(store: HistoryStore, run_id: str, op: dict[str, Any], at: dt.datetime) -> None:
    if op["op"] == "record":
        change = Change(op["seq"], op["kind"], op["target"], op["original"], op["intended"],
                        EntryState.PENDING)  # fmt: skip
        rows.replay_entry(store, run_id, change, at)
    elif op["op"] == "mark":
        rows.replay_state(store, run_id, op["seq"], EntryState(op["state"]), at)


__all__ = [
    "STATE_DIR_ENV",
    "Backlog",
    "StoreUnavailable",
    "WriteAheadJournal",
    "refuse_nondurable",
    "replay_left",
    "state_dir",
    "write_ahead_file",
]
