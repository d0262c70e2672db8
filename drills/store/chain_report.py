"""What verifying the evidence chain finds, and a run's links as an evidence pack lists them.

:mod:`drills.store.chain_verify` builds the report; this module holds its shape, so readers
of a report (the CLI, the packs) need not import the verifier.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from drills.store.chain import json_value
from drills.store.models import EvidenceEntry

STORE = "(the store)"  # the plan named by a problem of the whole store


# -- the report ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ChainProblem:
    """The first place where the store differs from its chain."""

    plan: str
    kind: str  # run | step | journal | readiness | audit | chain (a link itself)
    key: str  # run id, RUN/PHASE.STEP, RUN/SEQ, snapshot or audit id, or the link's seq
    # changed | removed | inserted | unchained; tampered (the chain itself gone),
    # truncated | rewritten (a checkpoint finds the chain shorter, or other)
    what: str
    detail: str
    seq: int | None = None  # the link of the chain where it shows
    label: str = ""

    def describe(self) -> str:
        where = f" ({self.label})" if self.label else ""
        at = f" at link {self.seq}" if self.seq is not None else ""
        return f"{self.plan}: {self.kind} {self.key}{where} {self.what}{at}: {self.detail}"

    def to_json(self) -> dict[str, Any]:
        return {
            "plan": self.plan, "kind": self.kind, "key": self.key, "what": self.what,
            "detail": self.detail, "seq": self.seq, "label": self.label,
        }  # fmt: skip


@dataclass(frozen=True)
class PlanChain:
    plan: str
    links: int
    records: int  # records checked against their newest link
    pre_chain: int  # links sealed when the store was upgraded
    open_runs: int  # runs not finished yet: not sealed, not judged
    head_sha256: str
    pruned: int = 0  # sealed records removed by a prune, consistent with their links


@dataclass(frozen=True)
class ChainReport:
    plans: tuple[PlanChain, ...]
    problems: tuple[ChainProblem, ...]  # in chain order, the first first
    chain_since: dt.datetime | None = None  # when the store got its chain

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first_problem(self) -> ChainProblem | None:
        return self.problems[0] if self.problems else None

    @property
    def pre_chain(self) -> int:
        return sum(p.pre_chain for p in self.plans)

    @property
    def open_runs(self) -> int:
        return sum(p.open_runs for p in self.plans)

    @property
    def links(self) -> int:
        return sum(p.links for p in self.plans)

    @property
    def pruned(self) -> int:
        return sum(p.pruned for p in self.plans)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "chain_since": self.chain_since.isoformat() if self.chain_since else None,
            "links": self.links,
            "pre_chain": self.pre_chain,
            "open_runs": self.open_runs,
            "pruned": self.pruned,
            "plans": [vars(p) for p in self.plans],
            "first_problem": self.first_problem.to_json() if self.first_problem else None,
            "problems": [p.to_json() for p in self.problems],
        }


@dataclass(frozen=True)
class ChainLink:
    """One link as an evidence pack's manifest lists it."""

    plan: str
    seq: int
    kind: str
    key: str
    label: str
    content_sha256: str
    prev_sha256: str
    entry_sha256: str
    pre_chain: bool
    chained_at: dt.datetime

    def to_json(self) -> dict[str, Any]:
        return {k: json_value(v) for k, v in vars(self).items()}


def run_evidence(store: Any, run_id: str) -> list[ChainLink]:
    """A run's links (the run, its steps, its journal), in chain order. ``store`` is a
    HistoryStore."""
    with store.session() as s:
        rows = s.scalars(
            select(EvidenceEntry).where(EvidenceEntry.run_id == run_id).order_by(EvidenceEntry.seq)
        ).all()
        return [_link(e) for e in rows]


def _link(e: EvidenceEntry) -> ChainLink:
    return ChainLink(
        e.plan, e.seq, e.kind, e.record_key, e.label, e.content_sha256, e.prev_sha256,
        e.entry_sha256, e.pre_chain, e.chained_at,
    )  # fmt: skip


__all__ = ["STORE", "ChainLink", "ChainProblem", "ChainReport", "PlanChain", "run_evidence"]
