"""Queries of the audit log (HistoryStore.audit writes it)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from sqlalchemy import select

from drills.store.history import HistoryStore
from drills.store.models import AuditEvent


def recent_events(store: HistoryStore, actions: Sequence[str], limit: int) -> list[AuditEvent]:
    """The newest ``limit`` events of these actions, newest first."""
    query = (
        select(AuditEvent)
        .where(AuditEvent.action.in_(actions))
        .order_by(AuditEvent.at.desc(), AuditEvent.id.desc())
        .limit(limit)
    )
    with store.session() as s:
        return list(s.scalars(query).all())


def events_of_plan(
    store: HistoryStore, plan: str, start: dt.datetime, end: dt.datetime
) -> list[AuditEvent]:
    """The plan's events from ``start`` to ``end`` (both included), in order."""
    query = (
        select(AuditEvent)
        .where(AuditEvent.plan == plan, AuditEvent.at >= start, AuditEvent.at <= end)
        .order_by(AuditEvent.at, AuditEvent.id)
    )
    with store.session() as s:
        return list(s.scalars(query).all())
