"""What `drills recover` reports: the choice it made, the status it reached, and why it
could not start; shared by the recovery of each mode and by the CLI that prints it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from drills.errors import DrillError, RunRefused
from drills.store.kinds import Mode, RunStatus
from drills.store.models import DrillRun
from drills.takeover.lease import LeaseHeldError, holder_role
from drills.takeover.measure import Measurement
from drills.takeover.timeline import Timeline

Action = Literal["rollback", "complete", "hold", "fail-back"]
RECOVER_ROLE = "recover"  # in a recover's lease holder: a second recover names the first


class RecoverStatus(StrEnum):
    # Only reported, never recorded: an incident waits for a person's --complete or --hold.
    NEEDS_DECISION = "needs-decision"
    # What a recover that acted records as the run's status.
    RECOVERED = RunStatus.RECOVERED.value
    RECOVER_FAILED = RunStatus.RECOVER_FAILED.value


class RecoverBusyError(RunRefused):
    """The plan's lease is held for the run being recovered: by another `drills recover`
    of it that got there first (the winner, named), or by the run itself, still alive."""

    def __init__(self, run: DrillRun, held: LeaseHeldError) -> None:
        self.holder = held.holder
        host, _, rest = held.holder.partition(":")
        who = f"process {rest.partition(':')[0]} on {host} ({held.holder})"
        until = f"until {held.expires_at:%Y-%m-%d %H:%M:%S} UTC"
        if holder_role(held.holder) == RECOVER_ROLE:
            message = (
                f"run {run.id} is being recovered by another `drills recover`, {who}, which "
                f"holds plan {run.plan}'s lease {until}; it got there first. Its outcome will "
                f"be in `drills history {run.id}`"
            )
        else:
            message = (
                f"run {run.id} is still held by its own process, {who}, {until}: it has not "
                "died. Wait for it, or cancel it"
            )
        super().__init__(message)


class RecoverError(DrillError):
    """Recovery cannot start: no such run, no plan to reach its targets, a wrong choice."""


@dataclass
class RecoverReport:
    run_id: str
    plan: str
    mode: Mode
    action: Action | None
    status: RecoverStatus
    journal: list[dict[str, Any]]
    state: dict[str, Any]
    undone: list[str] = field(default_factory=list)
    drift: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    timeline: Timeline = field(default_factory=Timeline)
    # An incident completed here: its RTO, from the T0 it was declared at.
    measurement: Measurement | None = None
    # Changes the journal had lost, undone from the snapshot before the run instead.
    from_snapshot: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "plan": self.plan,
            "mode": self.mode,
            "action": self.action,
            "status": self.status,
            "journal": self.journal,
            "state": self.state,
            "undone": self.undone,
            "drift": self.drift,
            "error": self.error,
            "rto_seconds": self.measurement.rto_seconds if self.measurement else None,
            "from_snapshot": self.from_snapshot,
        }


__all__ = [
    "RECOVER_ROLE",
    "Action",
    "RecoverBusyError",
    "RecoverError",
    "RecoverReport",
    "RecoverStatus",
]
