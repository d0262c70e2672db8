"""Thin out old readiness snapshots so the history store does not grow without bound.

A readiness run every few minutes leaves hundreds of thousands of snapshots a year,
nearly all the same as the one before. Of those older than the cutoff, a snapshot is
kept when it is

- the first of its UTC day holding some check (one result per check per day),
- where some check's status differs from that check's previous result, or where
  the overall verdict (ok, blocking count) differs from the previous snapshot's
  (every status change),
- or the plan's newest snapshot (what the dashboard and the metrics show).

Nothing else is touched: runs, journals, audit events and the evidence chain stay.
Each batch of removed snapshots is recorded in ``pruned_records`` and sealed by one
``prune`` link of the plan's chain (see :mod:`drills.store.chain`), so the chain still
verifies: a pruned snapshot is reported as pruned, consistent with its seal.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from drills.store import chain
from drills.store.history import HistoryStore, rows_matched
from drills.store.models import EvidenceMeta, PrunedRecord, ReadinessSnapshot

BATCH = 5000  # snapshots removed per transaction and per prune link


@dataclass
class PruneResult:
    cutoff: dt.datetime
    dry_run: bool
    examined: int = 0
    removed: dict[str, int] = field(default_factory=dict)  # by plan

    @property
    def total_removed(self) -> int:
        return sum(self.removed.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "cutoff": self.cutoff.isoformat(timespec="seconds"),
            "dry_run": self.dry_run,
            "examined": self.examined,
            "removed": self.total_removed,
            "kept": self.examined - self.total_removed,
            "by_plan": dict(sorted(self.removed.items())),
        }


class _Keeper:
    """Decides, snapshot after snapshot of one plan in time order, which must stay."""

    def __init__(self) -> None:
        self.seen_days: set[tuple[str, dt.date]] = set()
        self.last_status: dict[str, str] = {}
        self.last_verdict: tuple[bool, int] | None = None

    def keep(self, checked_at: dt.datetime, ok: bool, blocking: int, report: Any) -> bool:
        day = checked_at.astimezone(dt.UTC).date()
        results = report.get("results", []) if isinstance(report, dict) else []
        statuses = {str(r.get("id")): str(r.get("status")) for r in results if isinstance(r, dict)}
        verdict = (ok, blocking)
        wanted = verdict != self.last_verdict or any(
            (check, day) not in self.seen_days or self.last_status.get(check) != status
            for check, status in statuses.items()
        )
        self.last_verdict = verdict
        self.last_status.update(statuses)
        self.seen_days.update((check, day) for check in statuses)
        return wanted


def _plans(s: Session, cutoff: dt.datetime) -> list[str]:
    query = select(ReadinessSnapshot.plan).where(ReadinessSnapshot.checked_at < cutoff)
    return sorted(set(s.scalars(query.distinct()).all()))


def _removable(store: HistoryStore, plan: str, cutoff: dt.datetime) -> Iterator[int]:
    """Ids of the plan's snapshots older than the cutoff that no rule keeps."""
    table = ReadinessSnapshot
    with store.session() as s:
        newest = s.scalar(
            select(table.id).where(table.plan == plan).order_by(table.checked_at.desc()).limit(1)
        )
        rows = s.execute(
            select(table.id, table.checked_at, table.ok, table.blocking, table.report)
            .where(table.plan == plan, table.checked_at < cutoff)
            .order_by(table.checked_at, table.id)
            .execution_options(yield_per=1000)
        )
        keeper = _Keeper()
        for row_id, checked_at, ok, blocking, report in rows:
            if not keeper.keep(checked_at, ok, blocking, report) and row_id != newest:
                yield row_id


def _remove(store: HistoryStore, plan: str, ids: list[int], now: dt.datetime) -> None:
    """One batch: record each snapshot's hash, seal the batch, delete the snapshots."""

    def work(s: Session, sealer: chain.Sealer) -> None:
        digests = chain.row_digests(s, ReadinessSnapshot, ids)
        batch = [("readiness", key, sha) for key, sha in digests]
        link = sealer.append(
            plan, "prune", f"prune/{now.isoformat(timespec='seconds')}/{ids[0]}",
            chain.prune_digest(batch), label=f"pruned {len(batch)} readiness snapshots",
        )  # fmt: skip
        s.add_all(
            PrunedRecord(
                plan=plan, kind=kind, record_key=key, content_sha256=sha,
                prune_seq=link.seq, pruned_at=now,
            )
            for kind, key, sha in batch
        )  # fmt: skip
        s.execute(delete(ReadinessSnapshot).where(ReadinessSnapshot.id.in_(ids)))
        store.checkpoint(sealer, plan, "prune")

    store.write(work)


def prune_readiness(
    store: HistoryStore, older_than: dt.timedelta, *, dry_run: bool, now: dt.datetime | None = None
) -> PruneResult:
    """Remove the readiness snapshots older than ``older_than`` that no rule keeps."""
    now = now or dt.datetime.now(dt.UTC)
    result = PruneResult(cutoff=now - older_than, dry_run=dry_run)
    with store.session() as s:
        plans = _plans(s, result.cutoff)
        result.examined = (
            s.scalar(select(func.count()).where(ReadinessSnapshot.checked_at < result.cutoff)) or 0
        )
    for plan in plans:
        # Read first, then delete: a batch deleted while its plan's rows stream would
        # hold the read open across writes (and SQLite's lock with it).
        ids = list(_removable(store, plan, result.cutoff))
        result.removed[plan] = len(ids)
        if dry_run:
            continue
        for start in range(0, len(ids), BATCH):
            _remove(store, plan, ids[start : start + BATCH], now)
    return result


PRUNED_KEY = "readiness_pruned_at"  # evidence_meta: when the last scheduled prune ran
PRUNE_EVERY = dt.timedelta(days=1)


def prune_if_due(
    store: HistoryStore, older_than: dt.timedelta, *, now: dt.datetime | None = None
) -> PruneResult | None:
    """Prune once a day at most, for a caller that runs far more often (the readiness
    deployment, every 15 minutes); None when the last prune is less than a day old, or
    another caller is pruning now. A prune that fails gives the day back: the next call
    tries again."""
    now = now or dt.datetime.now(dt.UTC)
    with store.session() as s:
        last = s.get(EvidenceMeta, PRUNED_KEY)
        previous = last.value if last is not None else None
    if previous is not None and now - dt.datetime.fromisoformat(previous) < PRUNE_EVERY:
        return None
    mark = now.isoformat()
    if not _swap_mark(store, previous, mark):
        return None  # another caller took this day's prune
    try:
        return prune_readiness(store, older_than, dry_run=False, now=now)
    except BaseException:
        _swap_mark(store, mark, previous)
        raise


def _swap_mark(store: HistoryStore, expected: str | None, new: str | None) -> bool:
    """Set the last-prune mark to ``new`` only if it is still ``expected`` (None: absent)."""
    try:
        with store.session() as s:
            if expected is None:
                s.add(EvidenceMeta(key=PRUNED_KEY, value=new))
                return True
            where = (EvidenceMeta.key == PRUNED_KEY) & (EvidenceMeta.value == expected)
            if new is None:
                done = s.execute(delete(EvidenceMeta).where(where))
            else:
                done = s.execute(update(EvidenceMeta).where(where).values(value=new))
            return rows_matched(done) == 1
    except IntegrityError:
        return False  # another caller wrote the first mark
