"""Checkpoints of the evidence chain, and the check every opener of the store makes.

A hash chain cannot see its own tail cut off, nor a chain rebuilt from scratch: both
still link up. A *checkpoint* (transparency logs call it a signed tree head) is a plan's
chain length and head hash at a moment, signed with the evidence key when one is
configured. The store writes one at each run's end, each readiness batch and each prune
(table ``evidence_checkpoints``); ``drills evidence checkpoint`` copies them to a place
the store's owner cannot rewrite, and ``drills evidence verify --checkpoints`` fails when
the chain is shorter than, or differs from, any of them.

The store also refuses to be used once its chain is gone: from schema 0005 on, every
store has the chain marker from its creation (or from `drills db upgrade`, the only
place records from before the chain are adopted), so a store without it, or with final
records and no links, has been tampered with.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, exists, select
from sqlalchemy.orm import Session

from drills.errors import DrillError
from drills.store.chain import GENESIS, UPGRADED_KEY
from drills.store.models import (
    AuditEvent,
    DrillRun,
    EvidenceCheckpoint,
    EvidenceEntry,
    EvidenceMeta,
    JournalEntry,
    ReadinessSnapshot,
)

log = logging.getLogger(__name__)

# message -> (key id, signature); drills.evidence.checkpoints makes one from the evidence key
Sign = Callable[[bytes], tuple[str, bytes]]
FORMAT = "drills-checkpoint/v1"


class ChainTamperedError(DrillError):
    """The store's chain is gone or cut short: nothing it holds can be trusted."""


@dataclass(frozen=True)
class Checkpoint:
    plan: str
    length: int
    head_sha256: str
    at: dt.datetime
    reason: str = ""
    keyid: str | None = None
    signature: str | None = None  # base64

    def payload(self) -> bytes:
        """What the signature covers: the plan, the length, the head, the time."""
        body = {
            "format": FORMAT, "plan": self.plan, "length": self.length,
            "head_sha256": self.head_sha256, "at": self.at.astimezone(dt.UTC).isoformat(),
        }  # fmt: skip
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    def signed_by(self, sign: Sign | None) -> Checkpoint:
        if sign is None:
            return self
        keyid, sig = sign(self.payload())
        return Checkpoint(
            self.plan, self.length, self.head_sha256, self.at, self.reason, keyid,
            base64.b64encode(sig).decode("ascii"),
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {**json.loads(self.payload()), "reason": self.reason, "keyid": self.keyid,
                "signature": self.signature}  # fmt: skip

    @classmethod
    def from_json(cls, data: Any) -> Checkpoint:
        """A checkpoint as ``to_json`` wrote it; ValueError naming what is wrong."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a checkpoint (format {FORMAT} expected)")
        try:
            plan, length, head = data["plan"], data["length"], data["head_sha256"]
            at = dt.datetime.fromisoformat(data["at"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"a checkpoint field is missing or malformed: {exc}") from None
        if not (isinstance(plan, str) and type(length) is int and length >= 0):
            raise ValueError("a checkpoint's plan or length is malformed")
        if not (isinstance(head, str) and len(head) == 64) or at.tzinfo is None:
            raise ValueError("a checkpoint's head_sha256 or time is malformed")
        keyid, signature = data.get("keyid"), data.get("signature")
        if not all(v is None or isinstance(v, str) for v in (keyid, signature)):
            raise ValueError("a checkpoint's keyid or signature is malformed")
        return cls(plan, length, head, at, str(data.get("reason") or ""), keyid, signature)

    @classmethod
    def from_row(cls, row: EvidenceCheckpoint) -> Checkpoint:
        return cls(row.plan, row.length, row.head_sha256, row.at, row.reason, row.keyid,
                   row.signature)  # fmt: skip


def record(session: Session, plan: str, length: int, head: str, reason: str,
           sign: Sign | None) -> Checkpoint:  # fmt: skip
    """Keep a checkpoint of ``plan`` at ``length``/``head``, in the caller's transaction.

    A key that cannot sign (a reference that no longer resolves) must not lose the run
    being written: the checkpoint is kept unsigned, which it says, and the failure logged."""
    checkpoint = Checkpoint(plan, length, head, dt.datetime.now(dt.UTC), reason)
    try:
        checkpoint = checkpoint.signed_by(sign)
    except DrillError as exc:
        log.error("checkpoint of plan %s kept unsigned: %s", plan, exc)
    session.add(
        EvidenceCheckpoint(
            plan=plan, length=length, head_sha256=head, at=checkpoint.at, reason=reason,
            keyid=checkpoint.keyid, signature=checkpoint.signature,
        )
    )  # fmt: skip
    return checkpoint


def latest(conn: Session | Connection, plan: str) -> Checkpoint | None:
    """The plan's checkpoint of its longest chain, the newest of those (an index seek)."""
    table = EvidenceCheckpoint
    query = select(table.__table__).where(table.plan == plan)
    row = conn.execute(query.order_by(table.length.desc(), table.id.desc()).limit(1)).first()
    return Checkpoint.from_row(EvidenceCheckpoint(**dict(row._mapping))) if row else None


def all_checkpoints(conn: Session | Connection) -> list[Checkpoint]:
    rows = conn.execute(select(EvidenceCheckpoint.__table__).order_by(EvidenceCheckpoint.id))
    return [Checkpoint.from_row(EvidenceCheckpoint(**dict(r._mapping))) for r in rows]


@dataclass(frozen=True)
class Disagreement:
    """A checkpoint the chain does not match."""

    checkpoint: Checkpoint
    detail: str

    def describe(self, source: str) -> str:
        cp = self.checkpoint
        return (
            f"{cp.plan}: the chain {self.detail} the checkpoint of {cp.at.isoformat()} "
            f"in {source} (length {cp.length}, head {cp.head_sha256[:12]}…)"
        )


def disagreements(
    heads: dict[str, list[str]], checkpoints: Iterable[Checkpoint]
) -> list[Disagreement]:
    """Each checkpoint the chain contradicts. ``heads``: each plan's entry hashes in
    order (seq 1 first). A chain may have grown since; it may not be shorter, nor hold
    another hash at a checkpoint's length."""
    found = []
    for cp in checkpoints:
        chain = heads.get(cp.plan, [])
        if len(chain) < cp.length:
            found.append(Disagreement(cp, f"has {len(chain)} links, fewer than"))
            continue
        at = chain[cp.length - 1] if cp.length else GENESIS
        if at != cp.head_sha256:
            found.append(Disagreement(cp, f"holds link {at[:12]}… at {cp.length}, not that of"))
    return found


# -- the opener's check -------------------------------------------------------------------
OPEN_CHECKS = 200  # checkpoints the opener compares: the newest, a few index seeks each


def opening_problems(conn: Session | Connection) -> list[str]:
    """Why this store's chain cannot be trusted, in a few indexed queries on each open: its
    marker gone, its links gone while final records remain, or a plan's chain shorter than
    one of the store's newest checkpoints (verify_store holds it to every one).

    Each statement may see a later moment than the one before (SQLite and PostgreSQL's
    read committed both allow it) while others write; records, links and checkpoints
    are committed together and links are never deleted, so the records and checkpoints
    are read first, the links last: what is read later can only hold more links."""
    found = []
    marker = conn.execute(select(EvidenceMeta.value).where(EvidenceMeta.key == UPGRADED_KEY))
    if marker.first() is None:
        found.append("its evidence chain marker is gone (the chain was removed)")
    has_final = _has_final_records(conn)
    table = EvidenceCheckpoint
    recent = select(table.plan, table.length, table.at).order_by(table.id.desc()).limit(OPEN_CHECKS)
    claimed: dict[str, tuple[int, dt.datetime]] = {}
    for plan, length, at in conn.execute(recent):
        if length > claimed.get(plan, (-1, at))[0]:
            claimed[plan] = (length, at)
    has_links = conn.execute(select(exists().where(EvidenceEntry.id.isnot(None)))).scalar()
    if not has_links and has_final:
        found.append("it holds final records but no evidence chain (the chain was emptied)")
    for plan, (length, at) in sorted(claimed.items()):
        have = chain_length(conn, plan)
        if have < length:
            found.append(
                f"the chain of plan {plan} has {have} links, fewer than its checkpoint "
                f"of {at.isoformat()} ({length})"
            )
    return found


def chain_length(conn: Session | Connection, plan: str) -> int:
    """The plan's head's seq: one step down the unique (plan, seq) index."""
    query = select(EvidenceEntry.seq).where(EvidenceEntry.plan == plan)
    return int(conn.scalar(query.order_by(EvidenceEntry.seq.desc()).limit(1)) or 0)


def _has_final_records(conn: Session | Connection) -> bool:
    finals = (
        exists().where(DrillRun.finished_at.isnot(None)),
        exists().where(JournalEntry.seq.isnot(None)),
        exists().where(ReadinessSnapshot.id.isnot(None)),
        exists().where(AuditEvent.id.isnot(None)),
    )
    return any(conn.execute(select(query)).scalar() for query in finals)


__all__ = [
    "ChainTamperedError",
    "Checkpoint",
    "Disagreement",
    "Sign",
    "all_checkpoints",
    "chain_length",
    "disagreements",
    "latest",
    "opening_problems",
    "record",
]
