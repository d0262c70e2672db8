"""Incident proposals and their alerts (drills.takeover.proposals says what they mean).

An alert is known by its plan, its fingerprint and its startsAt: Alertmanager sends the
same alert again on every group_interval and repeat_interval, and in every group
notification it belongs to; each time it is the same row. A plan has at most one pending
proposal: a second alert matching while one waits joins it. Every change of state is a
compare-and-swap on the state it leaves, so two operators (or an operator and a resolved
alert) cannot both decide one proposal.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from drills.store.history import HistoryStore, rows_matched
from drills.store.models import IncidentProposal, ProposalAlert

PENDING, APPROVED, DISMISSED, WITHDRAWN = "pending", "approved", "dismissed", "withdrawn"
DECIDED_STATES = (APPROVED, DISMISSED, WITHDRAWN)
FIRING, RESOLVED = "firing", "resolved"
WRITE_RETRIES = 3  # two notifications of one alert at once: the loser finds the winner's row

Change = Literal["proposed", "joined", "repeated", "resolved", "withdrawn", "unknown"]


@dataclass(frozen=True)
class IncomingAlert:
    """One alert of an Alertmanager notification, as a plan's declare_on matched it."""

    plan: str
    fingerprint: str
    starts_at: dt.datetime
    status: str  # firing | resolved
    labels: dict[str, str]
    annotations: dict[str, str]
    group_key: str
    ends_at: dt.datetime | None = None

    @property
    def alertname(self) -> str:
        return self.labels.get("alertname", "?")


@dataclass(frozen=True)
class AlertChange:
    """What one alert did: ``proposed`` a new proposal, ``joined`` a pending one, was a
    ``repeated`` copy, ``resolved`` (``withdrawn``: and that withdrew its proposal), or
    resolved an alert never seen (``unknown``)."""

    change: Change
    proposal_id: str | None


@dataclass(frozen=True)
class Proposal:
    id: str
    plan: str
    state: str
    created_at: dt.datetime
    detected_at: dt.datetime
    group_key: str
    decided_at: dt.datetime | None
    decided_by: str | None
    outcome: str
    flow_run_id: str | None
    alerts: tuple[dict[str, Any], ...]


def _alert_json(row: ProposalAlert) -> dict[str, Any]:
    return {
        "alertname": row.alertname,
        "fingerprint": row.fingerprint,
        "starts_at": row.starts_at.isoformat(),
        "status": row.status,
        "labels": dict(row.labels),
        "annotations": dict(row.annotations),
        "resolved_at": row.resolved_at.isoformat() if row.resolved_at else None,
    }


def _proposal(s: Session, row: IncidentProposal) -> Proposal:
    alerts = s.scalars(
        select(ProposalAlert)
        .where(ProposalAlert.proposal_id == row.id)
        .order_by(ProposalAlert.starts_at, ProposalAlert.id)
    ).all()
    return Proposal(
        row.id, row.plan, row.state, row.created_at, row.detected_at, row.group_key,
        row.decided_at, row.decided_by, row.outcome, row.flow_run_id,
        tuple(_alert_json(a) for a in alerts),
    )  # fmt: skip


def record_alert(store: HistoryStore, alert: IncomingAlert, now: dt.datetime) -> AlertChange:
    """Keep one alert of a notification, as the module's docstring says."""
    for attempt in range(WRITE_RETRIES):
        try:
            with store.session() as s:
                return _record(s, alert, now)
        except IntegrityError:  # the same alert, written by a notification at the same time
            if attempt == WRITE_RETRIES - 1:
                raise
    raise AssertionError("unreachable")


def _record(s: Session, alert: IncomingAlert, now: dt.datetime) -> AlertChange:
    known = s.scalars(
        select(ProposalAlert).where(
            ProposalAlert.plan == alert.plan,
            ProposalAlert.fingerprint == alert.fingerprint,
            ProposalAlert.starts_at == alert.starts_at,
        )
    ).first()
    if alert.status != FIRING:
        return _resolve(s, known, now)
    if known is not None:
        return AlertChange("repeated", known.proposal_id)
    pending = s.scalars(
        select(IncidentProposal).where(
            IncidentProposal.plan == alert.plan, IncidentProposal.state == PENDING
        )
    ).first()
    change: Change = "joined"
    if pending is None:
        change = "proposed"
        pending = IncidentProposal(
            id=uuid.uuid4().hex[:12], plan=alert.plan, state=PENDING, created_at=now,
            detected_at=alert.starts_at, group_key=alert.group_key, outcome="",
        )  # fmt: skip
        s.add(pending)
    elif alert.starts_at < pending.detected_at:
        pending.detected_at = alert.starts_at  # detection is the earliest of its alerts
    s.add(
        ProposalAlert(
            proposal_id=pending.id, plan=alert.plan, fingerprint=alert.fingerprint,
            starts_at=alert.starts_at, alertname=alert.alertname[:256],
            labels=dict(alert.labels), annotations=dict(alert.annotations), status=FIRING,
            received_at=now,
        )
    )  # fmt: skip
    s.flush()
    return AlertChange(change, pending.id)


def _resolve(s: Session, known: ProposalAlert | None, now: dt.datetime) -> AlertChange:
    if known is None:
        return AlertChange("unknown", None)
    if known.status == RESOLVED:
        return AlertChange("repeated", known.proposal_id)
    known.status, known.resolved_at = RESOLVED, now
    s.flush()
    firing = s.scalar(
        select(func.count())
        .select_from(ProposalAlert)
        .where(ProposalAlert.proposal_id == known.proposal_id, ProposalAlert.status == FIRING)
    )
    if firing:
        return AlertChange("resolved", known.proposal_id)
    withdrawn = s.execute(
        update(IncidentProposal)
        .where(IncidentProposal.id == known.proposal_id, IncidentProposal.state == PENDING)
        .values(state=WITHDRAWN, decided_at=now, decided_by="alertmanager",
                outcome="every alert that proposed it resolved before anyone approved it")
    )  # fmt: skip
    return AlertChange("withdrawn" if rows_matched(withdrawn) else "resolved", known.proposal_id)


def get(store: HistoryStore, proposal_id: str) -> Proposal | None:
    with store.session() as s:
        row = s.get(IncidentProposal, proposal_id)
        return _proposal(s, row) if row is not None else None


def listing(
    store: HistoryStore, states: Sequence[str] = (PENDING,), limit: int = 20
) -> list[Proposal]:
    """Proposals in these states, newest first."""
    with store.session() as s:
        rows = s.scalars(
            select(IncidentProposal)
            .where(IncidentProposal.state.in_(states))
            .order_by(IncidentProposal.created_at.desc(), IncidentProposal.id)
            .limit(limit)
        ).all()
        return [_proposal(s, row) for row in rows]


def decide(
    store: HistoryStore,
    proposal_id: str,
    *,
    to: str,
    who: str,
    outcome: str,
    now: dt.datetime,
    was: str = PENDING,
    flow_run_id: str | None = None,
) -> bool:
    """Move a proposal from ``was`` to ``to`` (compare-and-swap); whether it moved."""
    with store.session() as s:
        moved = s.execute(
            update(IncidentProposal)
            .where(IncidentProposal.id == proposal_id, IncidentProposal.state == was)
            .values(state=to, decided_at=now, decided_by=who[:256], outcome=outcome,
                    flow_run_id=flow_run_id)
        )  # fmt: skip
        return rows_matched(moved) == 1


def reopen(store: HistoryStore, proposal_id: str, outcome: str) -> None:
    """An approval whose incident was refused: the proposal waits again, saying why."""
    with store.session() as s:
        s.execute(
            update(IncidentProposal)
            .where(IncidentProposal.id == proposal_id, IncidentProposal.state == APPROVED)
            .values(state=PENDING, decided_at=None, decided_by=None, outcome=outcome)
        )


__all__ = [
    "APPROVED",
    "DECIDED_STATES",
    "DISMISSED",
    "FIRING",
    "PENDING",
    "RESOLVED",
    "WITHDRAWN",
    "AlertChange",
    "IncomingAlert",
    "Proposal",
    "decide",
    "get",
    "listing",
    "record_alert",
    "reopen",
]
