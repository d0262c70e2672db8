"""Tables of the history store. Kept apart from the queries in ``history.py``."""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from sqlalchemy import JSON, Boolean, DateTime, Float, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator


class UTCDateTime(TypeDecorator[dt.datetime]):
    """Stores aware datetimes; SQLite drops the zone, so put UTC back on read."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime given to the history store")
        return value.astimezone(dt.UTC) if value is not None else None

    def process_result_value(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        dt.datetime: UTCDateTime,
        dict[str, Any]: JSON,
        list[Any]: JSON,
    }


class ReadinessSnapshot(Base):
    __tablename__ = "readiness_snapshots"
    __table_args__ = (Index("ix_snapshot_plan_time", "plan", "checked_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    plan: Mapped[str] = mapped_column(String(128))
    checked_at: Mapped[dt.datetime]
    ok: Mapped[bool] = mapped_column(Boolean)
    blocking: Mapped[int] = mapped_column(Integer)
    report: Mapped[dict[str, Any]]


class DrillRun(Base):
    __tablename__ = "drill_runs"
    __table_args__ = (
        Index("ix_run_plan_started", "plan", "started_at"),
        Index("ix_run_started", "started_at"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    plan: Mapped[str] = mapped_column(String(128))
    plan_digest: Mapped[str] = mapped_column(String(80))
    mode: Mapped[str] = mapped_column(String(16))
    dry_run: Mapped[bool] = mapped_column(Boolean, default=False)
    operator: Mapped[str] = mapped_column(String(128))
    reason: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(32))
    started_at: Mapped[dt.datetime]
    t0: Mapped[dt.datetime | None]
    restored_at: Mapped[dt.datetime | None]
    finished_at: Mapped[dt.datetime | None]
    rto_seconds: Mapped[float | None] = mapped_column(Float)
    client_rto_seconds: Mapped[float | None] = mapped_column(Float)
    rpo_seconds: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    verdict: Mapped[str | None] = mapped_column(String(32))
    timeline: Mapped[list[Any]] = mapped_column(JSON, default=list)
    readiness: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    flow_run_id: Mapped[str | None] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(Text)


class JournalEntry(Base):
    __tablename__ = "journal"
    __table_args__ = (Index("ix_journal_run_seq", "run_id", "seq", unique=True),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(64))
    seq: Mapped[int] = mapped_column(Integer)
    step: Mapped[str] = mapped_column(String(128))
    target: Mapped[str] = mapped_column(String(256))
    original: Mapped[dict[str, Any]]
    intended: Mapped[dict[str, Any]]
    state: Mapped[str] = mapped_column(String(16))  # pending | applied | undone | failed
    created_at: Mapped[dt.datetime]
    updated_at: Mapped[dt.datetime]


class Lease(Base):
    __tablename__ = "leases"

    plan: Mapped[str] = mapped_column(String(128), primary_key=True)
    holder: Mapped[str] = mapped_column(String(256))
    run_id: Mapped[str] = mapped_column(String(64))
    expires_at: Mapped[dt.datetime]


class AuditEvent(Base):
    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[dt.datetime]
    who: Mapped[str] = mapped_column(String(256))
    action: Mapped[str] = mapped_column(String(64))
    plan: Mapped[str] = mapped_column(String(128))
    accepted: Mapped[bool] = mapped_column(Boolean)
    reason: Mapped[str] = mapped_column(Text)
    detail: Mapped[dict[str, Any]]
