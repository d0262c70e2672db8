"""What drills tells people about: typed notices, one per change worth a message."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class EventKind(StrEnum):
    """The kinds of notice. Each is also the name of a Prefect event, prefixed ``drills.``."""

    READINESS_CHANGED = "readiness.changed"
    READINESS_REMINDER = "readiness.reminder"
    DRILL_DUE = "drill.due"
    DRILL_OVERDUE = "drill.overdue"
    RUN_STARTED = "run.started"
    RUN_FINISHED = "run.finished"
    INCIDENT_DECLARED = "incident.declared"
    RUN_ORPHANED = "run.orphaned"
    INCIDENT_FAILED_BACK = "incident.failed_back"
    INCIDENT_CLOSED = "incident.closed"
    INCIDENT_STUCK = "incident.stuck"
    INCIDENT_PROPOSED = "incident.proposed"
    PROPOSAL_WITHDRAWN = "incident.proposal_withdrawn"
    INCIDENT_SLO_BREACH = "incident.slo_breach"

    @property
    def event_name(self) -> str:
        return f"drills.{self.value}"

    @property
    def description(self) -> str:
        """When this notice is sent (the docs' event reference is generated from it)."""
        return _DESCRIPTIONS[self]


_DESCRIPTIONS = {
    EventKind.READINESS_CHANGED: "Checks started failing, or passed again.",
    EventKind.READINESS_REMINDER: "Checks still failing after DRILLS_NOTIFY_REMIND.",
    EventKind.DRILL_DUE: "The next drill is due within 14 days.",
    EventKind.DRILL_OVERDUE: "The last successful drill is over 92 days old, or there is none.",
    EventKind.RUN_STARTED: "A drill, an incident takeover or a failback started.",
    EventKind.RUN_FINISHED: "A run finished, with its verdict, RTO and RPO.",
    EventKind.INCIDENT_DECLARED: "An incident was declared for the plan.",
    EventKind.RUN_ORPHANED: "A run whose orchestrator died (its lease expired): a drill was "
    "rolled back by recover-orphans, an incident held for a person to decide.",
    EventKind.INCIDENT_FAILED_BACK: "A failback run brought the incident home to the primary; sent "
    "when that run ends.",
    EventKind.INCIDENT_CLOSED: "An incident was closed, by its failback or by "
    "`drills recover RUN --fail-back`.",
    EventKind.INCIDENT_STUCK: "An incident stopped part-way when a deadline passed or a "
    "step was refused: held as it stands, with the state of both sites and DNS and the one "
    "command that continues it; recover-orphans retries one stopped by a deadline (and says "
    "once more if that fails).",
    EventKind.INCIDENT_PROPOSED: "An alert matching the plan's declare_on proposed an incident: "
    "held on the Incident page (linked) until an operator approves it; never started on its own.",
    EventKind.PROPOSAL_WITHDRAWN: "Every alert that proposed an incident resolved before anyone "
    "approved it: the proposal is withdrawn.",
    EventKind.INCIDENT_SLO_BREACH: "After an incident's DNS switch, an SLO of the plan was not "
    "OK within the RTO target, breached during its hold, or could not be verified: reported, "
    "never rolled back.",
}


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
