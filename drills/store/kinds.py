"""The words that describe a run, shared by the takeover, the store, the CLI, flows and UI.

They are StrEnums so the database, the reports and the JSON output keep the plain
strings they always had, while code compares members and asks the questions below
of them instead of keeping its own list of strings.
"""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    DRILL = "drill"  # a rehearsal: it fails back and is verified against the state before
    INCIDENT = "incident"  # a real failover: never failed back on its own
    FAILBACK = "failback"  # the way home after an incident: a planned move back to the primary
    # DR brought up and verified beside the primary, never fenced, then stood down again
    PRACTICE = "practice"

    @property
    def rehearsal(self) -> bool:
        """Ends where it started: a failure rolls it back, `drills recover` too."""
        return self in (Mode.DRILL, Mode.PRACTICE)


class RunStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    DRY_RUN = "dry-run"
    FAILBACK_DRIFT = "failback-drift"  # the takeover worked, but failback left differences
    ABORTED = "aborted"  # stopped before any change: preflight or approval
    CANCELLED = "cancelled"
    FAILED = "failed"  # an incident that stopped on an error; it is never rolled back
    ROLLED_BACK = "rolled-back"
    ROLLBACK_FAILED = "rollback-failed"
    RECOVERED = "recovered"  # set by `drills recover`
    RECOVER_FAILED = "recover-failed"
    SKIPPED = "skipped"  # a scheduled drill or practice a gate held back: nothing changed

    @property
    def succeeded(self) -> bool:
        """The run did what was asked: a takeover that completed, or a dry run that listed
        its changes. Anything else fails the command, the flow run and the verdict."""
        return self in (RunStatus.SUCCEEDED, RunStatus.DRY_RUN)

    @property
    def counts_for_cadence(self) -> bool:
        """Only a completed takeover proves the plan works; a dry run changes nothing."""
        return self is RunStatus.SUCCEEDED


class Verdict(StrEnum):
    MET = "met"
    MISSED = "missed"  # completed, but outside the plan's RTO or RPO
    # DR answered, but a validation job, an SLO or the load probe showed it cannot carry
    # production; a drill then rolls back
    NOT_MET = "not met"
    FAILED = "failed"
    ABORTED = "aborted"
    CANCELLED = "cancelled"

    @property
    def failure(self) -> bool:
        """Shown as a failure among the successes of the RTO trend; a cancel is not one."""
        return self in (Verdict.FAILED, Verdict.ABORTED, Verdict.MISSED, Verdict.NOT_MET)


class EntryState(StrEnum):
    """Where one journalled change stands; a crash between journal and write leaves PENDING."""

    PENDING = "pending"
    APPLIED = "applied"
    UNDONE = "undone"
    FAILED = "failed"  # the write failed and the original is still there: nothing to undo

    @property
    def needs_undo(self) -> bool:
        """Applied, or possibly applied: the undo restores the original either way."""
        return self in (EntryState.PENDING, EntryState.APPLIED)


__all__ = ["EntryState", "Mode", "RunStatus", "Verdict"]
