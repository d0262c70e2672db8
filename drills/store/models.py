"""Tables of the history store. Kept apart from the queries in ``history.py``."""

from __future__ import annotations

import datetime as dt
import typing
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel
from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    type_coerce,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeDecorator

from drills.store.details import RunDetails
from drills.store.kinds import EntryState, Mode, RunStatus, Verdict

E = TypeVar("E", bound=StrEnum)


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


class EnumText(TypeDecorator[E]):
    """A StrEnum kept as its plain string, so stores written before the enum read the same.

    Any string binds, so a filter on an unknown word finds nothing instead of raising;
    what is written comes from typed code.
    """

    impl = String
    cache_ok = True

    def __init__(self, enum: type[E], length: int) -> None:
        super().__init__(length)
        self.enum = enum

    def process_bind_param(self, value: E | str | None, dialect: Any) -> str | None:
        return None if value is None else str(value)

    def process_result_value(self, value: str | None, dialect: Any) -> E | None:
        return None if value is None else self.enum(value)


class DetailsJSON(TypeDecorator[RunDetails]):
    """A run's details: JSON in the database, a RunDetails in Python (a dict also binds)."""

    impl = JSON
    cache_ok = True

    def process_bind_param(
        self, value: RunDetails | dict[str, Any] | None, dialect: Any
    ) -> dict[str, Any]:
        if not isinstance(value, RunDetails):
            value = RunDetails.model_validate(value or {})
        return value.to_json()

    def process_result_value(self, value: dict[str, Any] | None, dialect: Any) -> RunDetails:
        return RunDetails.model_validate(value or {})


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
        # The latest run of a plan in one mode, and the unfinished runs: what each scrape
        # of `drills metrics serve` asks, without reading every run.
        Index("ix_run_plan_mode_started", "plan", "mode", "started_at"),
        Index("ix_run_finished", "finished_at"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    plan: Mapped[str] = mapped_column(String(128))
    plan_digest: Mapped[str] = mapped_column(String(80))
    mode: Mapped[Mode] = mapped_column(EnumText(Mode, 16))
    dry_run: Mapped[bool] = mapped_column(Boolean, default=False)
    operator: Mapped[str] = mapped_column(String(128))
    reason: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[RunStatus] = mapped_column(EnumText(RunStatus, 32))
    started_at: Mapped[dt.datetime]
    t0: Mapped[dt.datetime | None]
    restored_at: Mapped[dt.datetime | None]
    finished_at: Mapped[dt.datetime | None]
    rto_seconds: Mapped[float | None] = mapped_column(Float)
    client_rto_seconds: Mapped[float | None] = mapped_column(Float)
    preemption_seconds: Mapped[float | None] = mapped_column(Float)
    # Until DR carried target_percent of the primary's demand (None: not carried, or none).
    carry_seconds: Mapped[float | None] = mapped_column(Float)
    rpo_seconds: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    verdict: Mapped[Verdict | None] = mapped_column(EnumText(Verdict, 32))
    timeline: Mapped[list[Any]] = mapped_column(JSON, default=list)
    readiness: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    details: Mapped[RunDetails] = mapped_column(DetailsJSON, default=RunDetails)
    flow_run_id: Mapped[str | None] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(Text)


class JournalEntry(Base):
    __tablename__ = "journal"
    __table_args__ = (Index("ix_journal_run_seq", "run_id", "seq", unique=True),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(64))
    seq: Mapped[int] = mapped_column(Integer)
    # The kind of change (e.g. "workload.scale"); its column keeps the first name it had,
    # "step", so the journals of existing stores still read.
    kind: Mapped[str] = mapped_column("step", String(128))
    target: Mapped[str] = mapped_column(String(256))
    original: Mapped[dict[str, Any]]
    intended: Mapped[dict[str, Any]]
    state: Mapped[EntryState] = mapped_column(EnumText(EntryState, 16))
    created_at: Mapped[dt.datetime]
    updated_at: Mapped[dt.datetime]

    def to_json(self) -> dict[str, Any]:
        """The entry as reports and `drills recover` show it."""
        return {
            "seq": self.seq,
            "change": self.kind,
            "target": self.target,
            "original": self.original,
            "intended": self.intended,
            "state": self.state,
        }


class Lease(Base):
    __tablename__ = "leases"

    plan: Mapped[str] = mapped_column(String(128), primary_key=True)
    holder: Mapped[str] = mapped_column(String(256))
    run_id: Mapped[str] = mapped_column(String(64))
    expires_at: Mapped[dt.datetime]


class TargetLease(Base):
    """A target one run's takeover touches (a workload, a DNS record, a bucket), held
    beside its plan's lease so that two plans sharing it cannot run at once."""

    __tablename__ = "target_leases"

    target: Mapped[str] = mapped_column(String(64), primary_key=True)  # sha256 of the claim
    claim: Mapped[str] = mapped_column(Text)  # the target in words
    plan: Mapped[str] = mapped_column(String(128))
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


class EvidenceEntry(Base):
    """One link of a plan's evidence chain: a record in its final form, sealed.

    Append-only. ``seq`` counts the plan's links from 1; ``entry_sha256`` covers the
    previous link's hash and this link's place, kind, key and content hash, so that a
    record changed, removed or slipped in between afterwards shows (drills.store.chain).
    A record sealed again (a journal entry's next state, a run recovered) gets a new link
    under the same key: the newest link is what the record must still hold.
    """

    __tablename__ = "evidence_chain"
    __table_args__ = (
        # Two writers that read the same head cannot both append: one retries.
        UniqueConstraint("plan", "seq", name="ux_chain_plan_seq"),
        Index("ix_chain_run", "run_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    plan: Mapped[str] = mapped_column(String(128))
    seq: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))  # run | step | journal | readiness | audit
    record_key: Mapped[str] = mapped_column(String(160))
    run_id: Mapped[str | None] = mapped_column(String(64))
    label: Mapped[str] = mapped_column(String(300), default="")
    content_sha256: Mapped[str] = mapped_column(String(64))
    prev_sha256: Mapped[str] = mapped_column(String(64))
    entry_sha256: Mapped[str] = mapped_column(String(64))
    # Sealed when an older store was upgraded: trusted from chained_at only, not from its start.
    pre_chain: Mapped[bool] = mapped_column(Boolean, default=False)
    chained_at: Mapped[dt.datetime]


class PrunedRecord(Base):
    """A sealed record removed by `drills db prune`: what its content hashed to, and the
    chain link (kind ``prune``) whose hash covers this batch. The chain then shows the
    record as pruned-but-consistent rather than removed."""

    __tablename__ = "pruned_records"
    __table_args__ = (Index("ix_pruned_plan_seq", "plan", "prune_seq"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    plan: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(16))
    record_key: Mapped[str] = mapped_column(String(160))
    content_sha256: Mapped[str] = mapped_column(String(64))
    prune_seq: Mapped[int] = mapped_column(Integer)  # the prune link's seq in the plan's chain
    pruned_at: Mapped[dt.datetime]


class EvidenceCheckpoint(Base):
    """A plan's chain head at a moment (a run's end, a readiness batch, a prune): its
    length and the hash of its newest link, signed with the evidence key when one is
    configured. Copies kept outside the store (``drills evidence checkpoint``) are what
    prove later that the chain was not cut short or rewritten (drills.store.checkpoints)."""

    __tablename__ = "evidence_checkpoints"
    __table_args__ = (Index("ix_checkpoint_plan_length", "plan", "length"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    plan: Mapped[str] = mapped_column(String(128))
    length: Mapped[int] = mapped_column(Integer)  # the links of the plan's chain then
    head_sha256: Mapped[str] = mapped_column(String(64))  # entry_sha256 of link ``length``
    at: Mapped[dt.datetime]
    reason: Mapped[str] = mapped_column(String(32))  # run | readiness | prune | export
    keyid: Mapped[str | None] = mapped_column(String(64))  # None: unsigned
    signature: Mapped[str | None] = mapped_column(Text)  # base64 Ed25519 over the payload


class EvidenceMeta(Base):
    """Facts about the store's chain, e.g. when it was upgraded to have one."""

    __tablename__ = "evidence_meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class SignInFailures(Base):
    """Failed dashboard sign-ins counted for one subject (a user name or a client address),
    kept in the store so that neither a new session nor a restarted server starts afresh.
    drills.store.sign_in reads and writes it."""

    __tablename__ = "sign_in_failures"

    subject: Mapped[str] = mapped_column(String(200), primary_key=True)  # "name:…" | "address:…"
    failures: Mapped[int] = mapped_column(Integer)  # since the last sign-in, or the count's reset
    last_failed_at: Mapped[dt.datetime]
    locked_until: Mapped[dt.datetime | None]


class IncidentProposal(Base):
    """An incident proposed by an alert (the receiver of `drills serve`), held for an
    operator: approved (its incident started), dismissed, or withdrawn when its alerts
    resolved first. drills.store.proposals reads and writes it."""

    __tablename__ = "incident_proposals"
    __table_args__ = (Index("ix_proposal_plan_state", "plan", "state"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    plan: Mapped[str] = mapped_column(String(128))
    state: Mapped[str] = mapped_column(String(16))  # pending | approved | dismissed | withdrawn
    created_at: Mapped[dt.datetime]
    detected_at: Mapped[dt.datetime]  # the earliest startsAt of its alerts
    group_key: Mapped[str] = mapped_column(Text)  # Alertmanager's groupKey of the first alert
    decided_at: Mapped[dt.datetime | None]
    decided_by: Mapped[str | None] = mapped_column(String(256))
    outcome: Mapped[str] = mapped_column(Text, default="")  # why withdrawn, what was started
    flow_run_id: Mapped[str | None] = mapped_column(String(64))


class ProposalAlert(Base):
    """One alert (a fingerprint firing from a startsAt) of a proposal: the same alert sent
    again, repeated or grouped, is this row, never a second proposal."""

    __tablename__ = "proposal_alerts"
    __table_args__ = (
        UniqueConstraint("plan", "fingerprint", "starts_at", name="ux_proposal_alert"),
        Index("ix_proposal_alert_proposal", "proposal_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    proposal_id: Mapped[str] = mapped_column(String(32))
    plan: Mapped[str] = mapped_column(String(128))
    fingerprint: Mapped[str] = mapped_column(String(64))
    starts_at: Mapped[dt.datetime]
    alertname: Mapped[str] = mapped_column(String(256))
    labels: Mapped[dict[str, Any]]
    annotations: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(16))  # firing | resolved
    received_at: Mapped[dt.datetime]
    resolved_at: Mapped[dt.datetime | None]


def details_value(*path: str) -> ColumnElement[Any]:
    """A value inside runs' details, read in SQL so that no run need be loaded.

    The path is checked against RunDetails: a renamed field fails here, at once, rather
    than as a query that quietly finds nothing.
    """
    model: type[BaseModel] = RunDetails
    for depth, name in enumerate(path):
        if name not in model.model_fields:
            raise KeyError(f"{'.'.join(path[: depth + 1])} is not a field of a run's details")
        if depth < len(path) - 1:
            model = _nested_model(model, name)
    value: ColumnElement[Any] = type_coerce(DrillRun.details, JSON)
    for name in path:
        value = value[name]
    return value


def _nested_model(model: type[BaseModel], name: str) -> type[BaseModel]:
    annotation = model.model_fields[name].annotation
    for candidate in typing.get_args(annotation) or (annotation,):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    raise KeyError(f"{name} of {model.__name__} holds no fields")
