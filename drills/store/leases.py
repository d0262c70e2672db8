"""The rows of the plan and target leases (drills.takeover.lease says what they mean).

Taking one is an INSERT, or an UPDATE that only matches the stale row its taker saw: a
compare-and-swap in one statement, atomic on SQLite and on PostgreSQL alike.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from drills.store.clock import database_now
from drills.store.history import HistoryStore, rows_matched
from drills.store.models import DrillRun, Lease, TargetLease

# The takeover's name: what an operator reads in the logs is about its lease.
log = logging.getLogger("drills.takeover.lease")

HolderIsDead = Callable[[str], bool]


def current(store: HistoryStore, plan: str) -> Lease | None:
    with store.session() as s:
        return s.get(Lease, plan)


def take(
    store: HistoryStore,
    row: Lease | TargetLease,
    now: dt.datetime,
    holder_is_dead: HolderIsDead,
    keep: Callable[[Any], bool] = lambda _stale_row: False,
) -> Any:
    """Insert ``row``, or take over a stale one of its key (expired, or its holder dead)
    unless ``keep`` says its holder still has it. None when taken; else the row of whoever
    holds it."""
    model: Any = type(row)
    table: Any = model.__table__
    key_column = next(iter(table.primary_key.columns))
    key = getattr(row, key_column.name)
    values = {c.name: getattr(row, c.name) for c in table.columns}
    try:
        with store.session() as s:
            s.execute(insert(model).values(values))
        return None
    except IntegrityError:
        pass
    with store.session() as s:
        existing: Any = s.get(model, key)
    if existing is None:  # released between our insert and our look: try once more
        return take(store, row, now, holder_is_dead, keep)
    dead = holder_is_dead(existing.holder)
    if (existing.expires_at <= now or dead) and not keep(existing):
        # Compare-and-swap on the holder we saw, still expired: two takers cannot both
        # win, and a holder that renewed meanwhile keeps its lease.
        stale = model.expires_at <= now if not dead else model.holder == existing.holder
        with store.session() as s:
            taken = rows_matched(
                s.execute(
                    update(model)
                    .where(key_column == key, model.holder == existing.holder, stale)
                    .values(values)
                )
            )
        if taken == 1:
            log.warning("took over the lease of %s from %s (run %s)", key, existing.holder,
                        existing.run_id)  # fmt: skip
            return None
        with store.session() as s:
            existing = s.get(model, key) or existing
    return existing


def release_targets(store: HistoryStore, holder: str) -> None:
    with store.session() as s:
        s.execute(delete(TargetLease).where(TargetLease.holder == holder))


def lapse_targets(store: HistoryStore, holder: str) -> None:
    """The holder's targets expired now, their rows kept."""
    with store.session() as s:
        s.execute(update(TargetLease).where(TargetLease.holder == holder).values(
            expires_at=database_now(store)))  # fmt: skip


def renew(store: HistoryStore, plan: str, holder: str, expires: dt.datetime) -> bool:
    """The plan's lease and the holder's targets expire at ``expires``, in one transaction;
    False if the plan's lease is no longer ``holder``'s."""
    with store.session() as s:
        count = rows_matched(
            s.execute(
                update(Lease)
                .where(Lease.plan == plan, Lease.holder == holder)
                .values(expires_at=expires)
            )
        )
        s.execute(
            update(TargetLease).where(TargetLease.holder == holder).values(expires_at=expires)
        )
    return count == 1


def release(store: HistoryStore, plan: str, holder: str) -> None:
    with store.session() as s:
        s.execute(delete(Lease).where(Lease.plan == plan, Lease.holder == holder))


def unfinished_runs_and_leases(store: HistoryStore) -> tuple[list[DrillRun], dict[str, Lease]]:
    """Every run not finished (dry runs left out), oldest first, and every plan's lease,
    read in one transaction."""
    with store.session() as s:
        runs = s.scalars(
            select(DrillRun)
            .where(DrillRun.finished_at.is_(None), DrillRun.dry_run.is_(False))
            .order_by(DrillRun.started_at)
        ).all()
        leases = {lease.plan: lease for lease in s.scalars(select(Lease)).all()}
    return list(runs), leases
