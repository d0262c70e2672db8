"""Detection to declaration: an alert proposes an incident, a person approves it.

Alertmanager posts its notifications (webhook JSON, version "4") to the receiver of
`drills serve` (drills.orchestrator.receiver). Each firing alert that matches a plan's
``declare_on`` is kept with its labels and ``startsAt``; the first one makes a
**proposed incident** of the plan, announced with a link to the Incident page. Nothing
is started: only an operator approving it there declares the incident, whose
``detected_at`` is then the earliest ``startsAt`` of its alerts. The same alert sent
again (grouped, repeated) is the same alert. A proposal whose alerts all resolved before
anyone approved it is withdrawn. Every step is written to the audit log.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from drills.notify.deliver import notify
from drills.notify.proposals import incident_proposed, proposal_withdrawn
from drills.plan import DrillPlan
from drills.plan.models.drill_gates import selector_matches
from drills.store import proposals as stored
from drills.store.history import HistoryStore
from drills.takeover.incident import (
    Declaration,
    IncidentLauncher,
    IncidentRequest,
    consent_problem,
    declare_incident,
)

log = logging.getLogger("drills.takeover.proposals")

PROPOSE_ACTION = "propose-incident"
WITHDRAW_ACTION = "withdraw-proposal"
DISMISS_ACTION = "dismiss-proposal"
APPROVE_ACTION = "approve-proposal"
ACTIONS = (PROPOSE_ACTION, WITHDRAW_ACTION, DISMISS_ACTION, APPROVE_ACTION)
WEBHOOK_VERSION = "4"
MAX_BODY_BYTES = 4 * 1024 * 1024  # Alertmanager caps a notification's alerts (max_alerts)


class NotificationError(ValueError):
    """A body that is not an Alertmanager webhook notification (version 4)."""


@dataclass(frozen=True)
class WebhookAlert:
    status: str
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: dt.datetime
    ends_at: dt.datetime | None
    fingerprint: str


@dataclass(frozen=True)
class Notification:
    group_key: str
    status: str
    alerts: tuple[WebhookAlert, ...]


def _time(value: object, field: str) -> dt.datetime:
    if not isinstance(value, str):
        raise NotificationError(f"{field} is not an RFC 3339 time")
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise NotificationError(f"{field} is not an RFC 3339 time") from None
    if parsed.tzinfo is None:
        raise NotificationError(f"{field} has no time zone")
    return parsed.astimezone(dt.UTC)


def _strings(value: object, field: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise NotificationError(f"{field} is not a mapping of strings")
    return dict(value)


def _alert(raw: object, index: int) -> WebhookAlert:
    where = f"alerts[{index}]"
    if not isinstance(raw, dict):
        raise NotificationError(f"{where} is not an object")
    status = raw.get("status")
    if status not in (stored.FIRING, stored.RESOLVED):
        raise NotificationError(f"{where}.status is neither firing nor resolved")
    fingerprint = raw.get("fingerprint")
    if not isinstance(fingerprint, str) or not 0 < len(fingerprint) <= 64:
        raise NotificationError(f"{where}.fingerprint is missing")
    ends = _time(raw.get("endsAt"), f"{where}.endsAt")
    return WebhookAlert(
        status=status,
        labels=_strings(raw.get("labels"), f"{where}.labels"),
        annotations=_strings(raw.get("annotations") or {}, f"{where}.annotations"),
        starts_at=_time(raw.get("startsAt"), f"{where}.startsAt"),
        ends_at=ends if ends.year > 1 else None,  # Go's zero time: not ended
        fingerprint=fingerprint,
    )


def parse_notification(body: bytes) -> Notification:
    """The notification in ``body``; NotificationError (one line) when it is not one."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise NotificationError("the body is not JSON") from None
    if not isinstance(data, dict):
        raise NotificationError("the body is not a JSON object")
    if data.get("version") != WEBHOOK_VERSION:
        raise NotificationError(
            f"version {data.get('version')!r} is not the webhook version {WEBHOOK_VERSION!r}"
        )
    alerts = data.get("alerts")
    if not isinstance(alerts, list):
        raise NotificationError("alerts is not a list")
    group_key = data.get("groupKey")
    if not isinstance(group_key, str):
        raise NotificationError("groupKey is missing")
    status = str(data.get("status", ""))
    return Notification(group_key, status, tuple(_alert(a, i) for i, a in enumerate(alerts)))


def matching_plans(plans: Sequence[DrillPlan], labels: dict[str, str]) -> list[DrillPlan]:
    return [p for p in plans if any(selector_matches(s, labels) for s in p.declare_on)]


def receive(
    notification: Notification,
    plans: Sequence[DrillPlan],
    history: HistoryStore,
    now: dt.datetime | None = None,
) -> list[stored.AlertChange]:
    """Keep each alert of the notification that matches a plan's declare_on: propose,
    join, resolve or withdraw (audited and announced). Starts nothing."""
    at = now or dt.datetime.now(dt.UTC)
    changes = []
    for alert in notification.alerts:
        for plan in matching_plans(plans, alert.labels):
            incoming = stored.IncomingAlert(
                plan=plan.name, fingerprint=alert.fingerprint, starts_at=alert.starts_at,
                status=alert.status, labels=alert.labels, annotations=alert.annotations,
                group_key=notification.group_key, ends_at=alert.ends_at,
            )  # fmt: skip
            change = stored.record_alert(history, incoming, at)
            _tell(plan, incoming, change, history)
            changes.append(change)
    return changes


def _tell(
    plan: DrillPlan, alert: stored.IncomingAlert, change: stored.AlertChange, history: HistoryStore
) -> None:
    if change.proposal_id is None or change.change not in ("proposed", "withdrawn"):
        log.info("alert %s on %s: %s", alert.alertname, plan.name, change.change)
        return
    detail = {"proposal_id": change.proposal_id, "alertname": alert.alertname,
              "fingerprint": alert.fingerprint, "starts_at": alert.starts_at.isoformat(),
              "labels": alert.labels}  # fmt: skip
    if change.change == "proposed":
        history.audit(
            who="alertmanager", action=PROPOSE_ACTION, plan=plan.name, accepted=True,
            reason=f"alert {alert.alertname} firing since {alert.starts_at.isoformat()}",
            detail=detail,
        )  # fmt: skip
        summary = alert.annotations.get("summary", "")
        notice = incident_proposed(
            plan.name, change.proposal_id, alert.alertname, alert.starts_at, summary
        )
    else:
        history.audit(
            who="alertmanager", action=WITHDRAW_ACTION, plan=plan.name, accepted=True,
            reason=f"alert {alert.alertname} resolved before anyone approved it", detail=detail,
        )  # fmt: skip
        notice = proposal_withdrawn(plan.name, change.proposal_id, alert.alertname)
    log.warning("%s", notice.title)
    notify([notice], plan)


@dataclass(frozen=True)
class Approval:
    """An operator's approval of a proposal, as the Incident page takes it."""

    proposal_id: str
    plan_path: str
    operator: str
    reason: str
    confirmation: str
    declared_at: dt.datetime  # T0: the click


def approve(approval: Approval, history: HistoryStore, launcher: IncidentLauncher) -> Declaration:
    """Declare the proposal's incident, with ``detected_at`` its alerts' earliest startsAt.

    The proposal is taken (pending → approved) before the incident is declared, so a
    second approval or its alerts resolving cannot both win; a declaration that is
    refused puts it back, saying why."""
    found = stored.get(history, approval.proposal_id)
    if found is None:
        return Declaration(False, f"refused: no proposal {approval.proposal_id}")
    problem = consent_problem(approval.operator, approval.reason, approval.confirmation, found.plan)
    if problem is None and found.state != stored.PENDING:
        problem = f"the proposal is {found.state}, no longer pending"
    if problem is not None:
        _audit(history, found, approval.operator, approval.reason, False, problem)
        return Declaration(False, f"refused: {problem}")
    taken = stored.decide(history, found.id, to=stored.APPROVED, who=approval.operator,
                          outcome="approved; declaring", now=approval.declared_at)  # fmt: skip
    if not taken:
        now = stored.get(history, found.id)
        why = f"the proposal is {now.state if now else 'gone'}, no longer pending"
        _audit(history, found, approval.operator, approval.reason, False, why)
        return Declaration(False, f"refused: {why}")
    request = IncidentRequest(
        plan_path=approval.plan_path, plan_name=found.plan, operator=approval.operator,
        reason=approval.reason, confirmation=approval.confirmation,
        declared_at=approval.declared_at,
        extra_parameters={"detected_at": found.detected_at.isoformat(), "proposal": found.id},
    )  # fmt: skip
    declaration = declare_incident(request, history, launcher)
    if declaration.accepted:
        stored.decide(history, found.id, to=stored.APPROVED, was=stored.APPROVED,
                      who=approval.operator, outcome=declaration.message,
                      now=approval.declared_at, flow_run_id=declaration.flow_run_id)  # fmt: skip
    else:
        stored.reopen(history, found.id, declaration.message)
    _audit(history, found, approval.operator, approval.reason, declaration.accepted,
           declaration.message)  # fmt: skip
    return declaration


def dismiss(
    history: HistoryStore, proposal_id: str, *, who: str, reason: str, now: dt.datetime
) -> str | None:
    """Dismiss a pending proposal (no incident); why not, or None when done."""
    found = stored.get(history, proposal_id)
    if found is None:
        return f"no proposal {proposal_id}"
    if not who.strip() or not reason.strip():
        return "dismissing needs who and a reason"
    if not stored.decide(history, proposal_id, to=stored.DISMISSED, who=who,
                         outcome=f"dismissed: {reason}", now=now):  # fmt: skip
        return "the proposal is no longer pending"
    history.audit(who=who, action=DISMISS_ACTION, plan=found.plan, accepted=True, reason=reason,
                  detail={"proposal_id": proposal_id})  # fmt: skip
    return None


def _audit(
    history: HistoryStore, found: stored.Proposal, who: str, reason: str, accepted: bool,
    outcome: str,
) -> None:  # fmt: skip
    detail: dict[str, Any] = {"proposal_id": found.id, "outcome": outcome,
                              "detected_at": found.detected_at.isoformat()}  # fmt: skip
    history.audit(who=who or "(nobody)", action=APPROVE_ACTION, plan=found.plan,
                  accepted=accepted, reason=reason, detail=detail)  # fmt: skip


__all__ = [
    "ACTIONS",
    "APPROVE_ACTION",
    "DISMISS_ACTION",
    "PROPOSE_ACTION",
    "WITHDRAW_ACTION",
    "Approval",
    "Notification",
    "NotificationError",
    "approve",
    "dismiss",
    "parse_notification",
    "receive",
]
