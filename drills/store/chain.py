"""The evidence chain: every record a drill leaves, sealed in order, so tampering shows.

Each plan has one chain (table ``evidence_chain``). A link is appended, in the same
transaction as the write, when a record reaches a final form:

- ``run``: a run row once it has finished, and again whenever it is written after that
  (``drills recover`` adds an attempt);
- ``step``: a timeline step once it has ended (key ``RUN/PHASE.STEP``, positions in the
  run's timeline);
- ``journal``: a journal entry as written, and again at each change of state
  (key ``RUN/SEQ``);
- ``readiness``: a readiness snapshot as stored (key: its id);
- ``audit``: an audit-log event as written (key: its id);
- ``prune``: a batch of readiness snapshots removed by ``drills db prune`` (key
  ``prune/N``): its content hash covers each removed record's kind, key and content
  hash, which the table ``pruned_records`` keeps. A sealed record gone with such a
  batch is *pruned*, not *removed*, as long as the batch still hashes to its link and
  the record's hash there is the one it was sealed with.

A link holds the SHA-256 of the record's canonical content (its columns as JSON: keys
sorted, no whitespace, times in UTC ISO form, NULLs left out) and the hash of the link
before it. The newest link of a record is what the record must still hold.

``verify_store`` (in :mod:`drills.store.chain_verify`, with the report it returns and
``run_evidence``) walks every plan's chain and compares it with the live tables: a record
whose content differs is *changed*, a sealed record that is gone is *removed*, a final
record with no link that sorts before sealed ones is *inserted* (after them: *unchained*),
and a link out of place (a seq gap, a broken prev hash) is reported as the chain's own.
A run not yet finished is *open*, not tampered with.

Stores made before the chain get one in `drills db upgrade`, and only there (never on
open: a store whose chain was emptied must not be quietly sealed again): the records
already there are sealed then, marked ``pre_chain``. They are trusted from that moment
only, and the report says so.

The chain proves order and integrity against edits made behind the store's back, not
against someone who rewrites the whole chain as well, or cuts off its newest links:
checkpoints kept outside the store (drills.store.checkpoints) show those.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pydantic import BaseModel
from sqlalchemy import JSON, Connection, Select, Table, select, text, type_coerce
from sqlalchemy.orm import Session

from drills.store.models import (
    AuditEvent,
    DetailsJSON,
    DrillRun,
    EvidenceEntry,
    EvidenceMeta,
    JournalEntry,
    ReadinessSnapshot,
)

GENESIS = "0" * 64
KINDS = ("run", "step", "journal", "readiness", "audit", "prune")
UPGRADED_KEY = "chain_since"  # evidence_meta: when this store got its chain


# -- digests -------------------------------------------------------------------------------
_AS_IS = frozenset({str, int, float, bool, type(None)})


def json_value(value: Any) -> Any:
    """A value as the canonical JSON holds it."""
    kind = type(value)
    # Exact types first: a sealed report is thousands of these, and an ABC's isinstance
    # is slow. Subclasses (a str Enum) take the general path below.
    if kind in _AS_IS:
        return value
    if kind is dict:
        return {str(k): json_value(v) for k, v in value.items()}
    if kind is list:
        return [json_value(v) for v in value]
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return aware.astimezone(dt.UTC).isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    return value


def canonical_json(content: Mapping[str, Any]) -> str:
    """Keys sorted, no whitespace, UTC ISO times; top-level NULLs left out (a column added
    later, NULL in old rows, leaves their digest as it was)."""
    plain = {str(k): json_value(v) for k, v in content.items() if v is not None}
    return json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def record_digest(content: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of a record's canonical content."""
    return hashlib.sha256(canonical_json(content).encode()).hexdigest()


def entry_digest(
    prev: str, plan: str, seq: int, kind: str, key: str, content_sha256: str, pre_chain: bool
) -> str:
    """SHA-256 of one link: the previous link's hash, then this link's place and content."""
    parts = (prev, plan, str(seq), kind, key, content_sha256, "pre-chain" if pre_chain else "")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _raw_columns(table: Table) -> list[Any]:
    """The table's columns as stored: a run's details as its JSON, not re-validated (a
    field added to RunDetails later must not change old runs' digests)."""
    return [
        type_coerce(c, JSON).label(c.name) if isinstance(c.type, DetailsJSON) else c
        for c in table.columns
    ]


def model_table(model: type[Any]) -> Table:
    """An ORM model's table, typed as one."""
    table: Table = model.__table__
    return table


def raw_rows(table: Table) -> Select[Any]:
    """A select of the table's rows as they are sealed and verified (see ``_raw_columns``)."""
    return select(*_raw_columns(table))


@dataclass(frozen=True)
class StepDigest:
    key: str  # RUN/PHASE.STEP, positions in the timeline from 0
    label: str  # "phase / step"
    sha256: str
    position: tuple[int, int]


def step_digests(run_id: str, timeline: Iterable[Any] | None) -> list[StepDigest]:
    """The ended steps of a run's timeline, each with its digest (phase name included)."""
    found = []
    for p, phase in enumerate(timeline or []):
        if not isinstance(phase, Mapping):
            continue
        for s, step in enumerate(phase.get("steps") or []):
            if not isinstance(step, Mapping) or step.get("ended_at") is None:
                continue
            digest = record_digest({"phase": phase.get("name"), "step": step})
            label = f"{phase.get('name')} / {step.get('name')}"
            found.append(StepDigest(f"{run_id}/{p}.{s}", label, digest, (p, s)))
    return found


def journal_key(run_id: str, seq: int) -> str:
    return f"{run_id}/{seq}"


def prune_digest(records: Iterable[tuple[str, str, str]]) -> str:
    """SHA-256 of a prune batch: its (kind, key, content hash) triples, in a fixed order."""
    lines = sorted(f"{kind}\t{key}\t{sha}" for kind, key, sha in records)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


# -- appending ----------------------------------------------------------------------------
class Sealer:
    """Appends links within one write transaction (the record's own), keeping each plan's
    head in hand. On SQLite the record's write comes first and holds the write lock, so
    the head read after it is the newest; elsewhere the unique (plan, seq) turns a race
    into an IntegrityError, and the store retries the whole write."""

    def __init__(self, session: Session, *, pre_chain: bool = False) -> None:
        self.session = session
        self.pre_chain = pre_chain
        self.now = dt.datetime.now(dt.UTC)
        self._heads: dict[str, tuple[int, str]] = {}

    def head(self, plan: str) -> tuple[int, str]:
        """The plan's chain as this transaction leaves it: (length, newest link's hash)."""
        return self._head(plan)

    def _head(self, plan: str) -> tuple[int, str]:
        if plan not in self._heads:
            self._take_turn(plan)
            last = self.session.execute(
                select(EvidenceEntry.seq, EvidenceEntry.entry_sha256)
                .where(EvidenceEntry.plan == plan)
                .order_by(EvidenceEntry.seq.desc())
                .limit(1)
            ).first()
            self._heads[plan] = (last[0], last[1]) if last else (0, GENESIS)
        return self._heads[plan]

    def _take_turn(self, plan: str) -> None:
        """On PostgreSQL, appenders to one plan's chain take turns until their transaction
        ends, as SQLite's write lock makes them: under many writers the unique (plan, seq)
        alone would send most of them round the retry loop again and again."""
        if self.session.get_bind().dialect.name == "postgresql":
            self.session.execute(
                text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": f"chain:{plan}"}
            )

    def append(
        self, plan: str, kind: str, key: str, content_sha256: str, *, run_id: str | None = None,
        label: str = "",
    ) -> EvidenceEntry:  # fmt: skip
        seq, prev = self._head(plan)
        seq += 1
        sha = entry_digest(prev, plan, seq, kind, key, content_sha256, self.pre_chain)
        entry = EvidenceEntry(
            plan=plan, seq=seq, kind=kind, record_key=key, run_id=run_id, label=label[:300],
            content_sha256=content_sha256, prev_sha256=prev, entry_sha256=sha,
            pre_chain=self.pre_chain, chained_at=self.now,
        )  # fmt: skip
        self.session.add(entry)
        self._heads[plan] = (seq, sha)
        return entry

    def _sealed(self, run_id: str) -> dict[tuple[str, str], str]:
        """The newest content hash of each record of a run already in the chain."""
        rows = self.session.execute(
            select(EvidenceEntry.kind, EvidenceEntry.record_key, EvidenceEntry.content_sha256)
            .where(EvidenceEntry.run_id == run_id)
            .order_by(EvidenceEntry.seq)
        )
        return {(kind, key): sha for kind, key, sha in rows}

    def seal_run(self, run_id: str) -> None:
        """The run's ended steps not sealed as they are now, then the run if it is final.

        A live timeline write of a run in progress reads only what the steps need; the
        whole row is read once the run is final."""
        self.session.flush()
        runs = model_table(DrillRun)
        head = self.session.execute(
            select(runs.c.plan, runs.c.finished_at, runs.c.timeline).where(runs.c.id == run_id)
        ).first()
        if head is None:
            return
        plan, finished_at, timeline = head
        sealed = self._sealed(run_id)
        for step in step_digests(run_id, timeline):
            if sealed.get(("step", step.key)) != step.sha256:
                self.append(plan, "step", step.key, step.sha256, run_id=run_id, label=step.label)
        if finished_at is None and ("run", run_id) not in sealed:
            return  # open: sealed when it finishes
        row = self.session.execute(raw_rows(runs).where(runs.c.id == run_id)).one()
        content = dict(row._mapping)
        digest = record_digest(content)
        if sealed.get(("run", run_id)) != digest:
            label = f"{json_value(content.get('mode'))} run, {json_value(content.get('status'))}"
            self.append(plan, "run", run_id, digest, run_id=run_id, label=label)

    def seal_journal(self, run_id: str, seq: int) -> None:
        self.session.flush()
        table = model_table(JournalEntry)
        row = self.session.execute(
            raw_rows(table).where(table.c.run_id == run_id, table.c.seq == seq)
        ).first()
        if row is None:
            return
        content = dict(row._mapping)
        plan = self.session.scalar(select(DrillRun.plan).where(DrillRun.id == run_id)) or ""
        # Written anew (a new entry, a new state, a new updated_at): always a new link.
        label = f"{content.get('step')} {content.get('target')}: {json_value(content.get('state'))}"
        digest = record_digest(content)
        self.append(plan, "journal", journal_key(run_id, seq), digest, run_id=run_id, label=label)

    def seal_row(self, model: type[ReadinessSnapshot] | type[AuditEvent], row_id: int) -> None:
        """A readiness snapshot or an audit event, just written (never written again)."""
        self.session.flush()
        table = model_table(model)
        row = self.session.execute(raw_rows(table).where(table.c.id == row_id)).first()
        if row is None:
            return
        content = dict(row._mapping)
        kind = "readiness" if model is ReadinessSnapshot else "audit"
        label = (
            f"readiness ok={content.get('ok')} blocking={content.get('blocking')}"
            if kind == "readiness"
            else f"{content.get('action')} by {content.get('who')}"
        )
        self.append(
            content.get("plan") or "", kind, str(row_id), record_digest(content), label=label
        )


def row_digests(
    session: Session, model: type[ReadinessSnapshot] | type[AuditEvent], ids: list[int]
) -> list[tuple[str, str]]:
    """(key, content hash) of some rows, hashed as ``Sealer.seal_row`` hashes them."""
    table = model_table(model)
    rows = session.execute(raw_rows(table).where(table.c.id.in_(ids)))
    return [(str(r.id), record_digest(dict(r._mapping))) for r in rows]


# -- upgrading an older store -------------------------------------------------------------
def chain_since(session: Session | Connection) -> dt.datetime | None:
    value = session.execute(
        select(EvidenceMeta.value).where(EvidenceMeta.key == UPGRADED_KEY)
    ).scalar()
    return dt.datetime.fromisoformat(value) if value else None


def upgrade(session: Session) -> int:
    """Give a store its chain: mark when, and seal what it already holds as pre-chain.

    The marker is written first; a second process upgrading at once fails on it (its
    caller ignores that) instead of sealing twice. Returns the links appended."""
    sealer = Sealer(session, pre_chain=True)
    session.add(EvidenceMeta(key=UPGRADED_KEY, value=sealer.now.isoformat()))
    session.flush()
    appended = 0
    runs = session.execute(select(DrillRun.id).order_by(DrillRun.started_at)).scalars().all()
    for run_id in runs:
        appended += _seal_old_run(sealer, run_id)
    for model in (ReadinessSnapshot, AuditEvent):
        ids = session.execute(select(model.id).order_by(model.id)).scalars().all()
        for row_id in ids:
            sealer.seal_row(model, row_id)
        appended += len(ids)
    return appended


def _seal_old_run(sealer: Sealer, run_id: str) -> int:
    seqs = sealer.session.execute(
        select(JournalEntry.seq).where(JournalEntry.run_id == run_id).order_by(JournalEntry.seq)
    ).scalars()
    count = 0
    for seq in seqs:
        sealer.seal_journal(run_id, seq)
        count += 1
    sealer.seal_run(run_id)
    return count + 1


__all__ = [
    "GENESIS",
    "KINDS",
    "Sealer",
    "StepDigest",
    "canonical_json",
    "chain_since",
    "entry_digest",
    "journal_key",
    "json_value",
    "model_table",
    "prune_digest",
    "raw_rows",
    "record_digest",
    "row_digests",
    "step_digests",
    "upgrade",
]
