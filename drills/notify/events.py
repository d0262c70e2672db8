"""What drills tells people about: typed notices, one per change worth a message."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class EventKind(StrEnum):
    """The kinds of notice. Each is also the name of a Prefect event, prefixed ``drills.``."""

    READINESS_CHANGED = "readiness.changed"  # checks started failing, or passed again
    READINESS_REMINDER = "readiness.reminder"  # still failing after DRILLS_NOTIFY_REMIND
    DRILL_DUE = "drill.due"  # the next drill is due within 14 days
    DRILL_OVERDUE = "drill.overdue"  # the last successful drill is over 92 days old, or none
    RUN_STARTED = "run.started"  # a drill or an incident takeover started
    RUN_FINISHED = "run.finished"  # ... and finished, with its verdict, RTO and RPO
    INCIDENT_DECLARED = "incident.declared"
    # A run whose orchestrator died (its lease expired): a drill was rolled back by
    # recover-orphans, an incident held for a person to decide.
    RUN_ORPHANED = "run.orphaned"
    # Sent by the failback run when it ends; closed also by `drills recover RUN --fail-back`.
    INCIDENT_FAILED_BACK = "incident.failed_back"
    INCIDENT_CLOSED = "incident.closed"
    # An incident whose deadline passed part-way: held as it stands, with the state and the
    # one command that continues it; recover-orphans retries it (told again if it fails).
    INCIDENT_STUCK = "incident.stuck"

    @property
    def event_name(self) -> str:
        return f"drills.{self.value}"


class Severity(StrEnum):
    """Apprise's notification types, in our words."""

    INFO = "info"
    SUCCESS = "success"
    WARNING = "warning"
    FAILURE = "failure"


@dataclass(frozen=True)
class Notice:
    """One message: which plan, what changed, what to do about it, where to look.

    ``payload`` is the same facts as data, for Prefect events and JSON receivers; it
    holds check ids, statuses and numbers, never a credential (nothing here ever
    reads one).
    """

    kind: EventKind
    plan: str
    title: str
    changed: tuple[str, ...]
    severity: Severity = Severity.INFO
    remediation: tuple[str, ...] = ()
    page: str = "readiness"  # the dashboard page that shows it
    payload: Mapping[str, Any] = field(default_factory=dict)
