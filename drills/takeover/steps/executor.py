"""Apply changes through the journal, and roll them back from it.

Every change is read, journalled with its original state, then written, then
marked applied. In a dry run nothing is journalled or written: the change is
only listed as current → intended.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from drills.errors import DrillError, RollbackIncompleteError, TemporaryError, UndoFailure
from drills.store.kinds import EntryState
from drills.takeover.journal import Change, Journal
from drills.takeover.steps.changes import KINDS, State
from drills.targets.retry import Waiting, retry_until
from drills.targets.sites import Targets

log = logging.getLogger("drills.takeover.steps")


@dataclass(frozen=True)
class PlannedChange:
    kind: str
    target: str
    current: State
    intended: State

    def describe(self) -> str:
        return f"{self.kind} {self.target}: {self.current} → {self.intended}"


def _no_crash_point(_: str) -> None:
    return None


class ChangeExecutor:
    def __init__(
        self,
        targets: Targets,
        journal: Journal,
        *,
        dry_run: bool = False,
        crash_point: Callable[[str], None] | None = None,
        undo_expected: bool = True,
    ) -> None:
        self.targets = targets
        self.journal = journal
        self.dry_run = dry_run
        # A drill's changes are all undone: each original must be one that can be written back.
        self.undo_expected = undo_expected
        self.planned: list[PlannedChange] = []
        # Named moments inside a change; the crash tests stop the process at each one.
        self._crash_point = crash_point or _no_crash_point
        # (kind, target) -> seq of a write that failed for now and may still land.
        self._in_flight: dict[tuple[str, str], int] = {}

    def apply(self, kind_name: str, target: str, intended: State) -> State:
        """Make ``target`` be ``intended``; returns the state it had before."""
        kind = KINDS[kind_name]
        current = kind.read(self.targets, target)
        if self.dry_run:
            self.planned.append(PlannedChange(kind_name, target, current, intended))
            return current
        if {k: current.get(k) for k in intended} == intended:
            if (seq := self._in_flight.pop((kind_name, target), None)) is not None:
                self.journal.mark(seq, EntryState.APPLIED)  # the write that failed for now landed
            return current  # already so: nothing to change, nothing to undo
        if self.undo_expected:
            kind.restorable(target, current)  # refused before anything is journalled or written
        seq = self.journal.record(kind_name, target, current, intended)
        self._crash_point(f"{kind_name} {target} journalled")
        try:
            kind.write(self.targets, target, intended)
        except TemporaryError:
            # Timed out, or the connection broke: the request may be queued at a stalled
            # server, which applies it when it resumes, after any read we make now. The entry
            # stays pending (possibly applied), so a rollback restores the original.
            self._in_flight[(kind_name, target)] = seq
            raise
        except DrillError:
            self._settle_failed_write(seq, kind_name, target, current)
            raise
        self._crash_point(f"{kind_name} {target} written")
        self.journal.mark(seq, EntryState.APPLIED)
        log.info("%s %s: %s -> %s", kind_name, target, current, intended)
        return current

    def _settle_failed_write(self, seq: int, kind_name: str, target: str, original: State) -> None:
        """After a write refused for good, look at what is really there.

        Still the original: nothing was applied, so nothing must be undone (an
        undo would need the same access that just failed). Anything else, or
        unreadable: leave the entry pending, so rollback restores the original.
        """
        try:
            now = KINDS[kind_name].read(self.targets, target)
        except DrillError:
            return
        if now == original:
            self.journal.mark(seq, EntryState.FAILED)

    def rollback(
        self,
        select: Callable[[Change], bool] = lambda _: True,
        *,
        deadline: float | None = None,
        on_wait: Callable[[Waiting], None] | None = None,
    ) -> list[Change]:
        """Undo every applied or possibly applied change (of those selected), newest first.

        With a ``deadline`` (``time.monotonic()``), a target that fails for now is retried
        until it, each wait told to ``on_wait``. An undo that fails does not stop the
        others; the failures are raised together at the end and stay in the journal for
        `drills recover`.
        """
        undone: list[Change] = []
        failures: list[UndoFailure] = []
        for change in filter(select, self.journal.to_undo()):
            try:
                if deadline is None:
                    self._undo(change)
                else:
                    retry_until(partial(self._undo, change), deadline=deadline, on_wait=on_wait)
            except DrillError as exc:
                failures.append(UndoFailure(change.seq, change.kind, change.target, str(exc)))
                continue
            self.journal.mark(change.seq, EntryState.UNDONE)
            undone.append(change)
            log.info("undid %s %s -> %s", change.kind, change.target, change.original)
        if failures:
            raise RollbackIncompleteError(failures)
        return undone

    def _undo(self, change: Change) -> None:
        kind = KINDS[change.kind]
        key = (change.kind, change.target)
        # Already back (a second recover, or a change that never took): no write. Except after
        # a write of ours that timed out: a server that resumes answers reads before it applies
        # the request it queued, so a read of the original proves nothing. Writing the original
        # queues the restore behind that request, at the same server.
        in_flight = key in self._in_flight
        if in_flight or kind.read(self.targets, change.target) != change.original:
            kind.write(self.targets, change.target, change.original)
            self._in_flight.pop(key, None)
            self._crash_point(f"undo {change.kind} {change.target} written")
