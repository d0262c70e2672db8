"""The sign-in lockout's memory: failed sign-ins counted per user name and per client address.

Kept in the history store, not in a session, so that a new browser session, another
replica of the dashboard or a restarted server all see the same count. The first
``FREE_FAILURES`` failures of a subject cost nothing; the next locks it for ``FIRST_LOCK``,
and each failure after that doubles the lock, up to ``MAX_LOCK``. A sign-in while locked is
refused without the password being looked at, and does not lengthen the lock: guessing on
cannot keep someone out for ever, only each guess after a lock ends costs twice as long.
A successful sign-in clears the count of its name and its address; a subject with no
failure for ``RESET_AFTER`` starts again from nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from sqlalchemy import case, delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from drills.store.history import HistoryStore, rows_matched
from drills.store.models import SignInFailures

FREE_FAILURES = 4
FIRST_LOCK = dt.timedelta(seconds=60)
MAX_LOCK = dt.timedelta(hours=1)
RESET_AFTER = dt.timedelta(hours=24)
NAME_CHARS = 150  # a subject is a primary key: a pasted novel is cut, not refused by the database
WRITE_RETRIES = 3  # two first failures of one subject at once: the loser's insert counts again


def subjects(name: str, address: str | None) -> list[str]:
    """What a sign-in is counted against: the name as typed (case and spaces aside), and
    the client's address when it is known."""
    found = [f"name:{' '.join(name.split()).casefold()[:NAME_CHARS]}"]
    if address:
        found.append(f"address:{address[:NAME_CHARS]}")
    return found


def lock_after(failures: int) -> dt.timedelta:
    """How long a subject is locked once it has failed ``failures`` times in a row."""
    if failures <= FREE_FAILURES:
        return dt.timedelta(0)
    return min(FIRST_LOCK * 2 ** min(failures - FREE_FAILURES - 1, 32), MAX_LOCK)


def _now(now: dt.datetime | None) -> dt.datetime:
    return now or dt.datetime.now(dt.UTC)


def wait_s(store: HistoryStore, names: Sequence[str], now: dt.datetime | None = None) -> float:
    """Seconds until any of these subjects may try again (0: at once)."""
    at = _now(now)
    with store.session() as s:
        until = s.scalars(
            select(SignInFailures.locked_until).where(
                SignInFailures.subject.in_(names), SignInFailures.locked_until > at
            )
        ).all()
    return max(((u - at).total_seconds() for u in until if u is not None), default=0.0)


def record_failure(
    store: HistoryStore, names: Sequence[str], now: dt.datetime | None = None
) -> tuple[int, float]:
    """Count one failure against each subject; returns the most failures any of them now
    has, and the seconds of lock that imposes."""
    at = _now(now)
    for attempt in range(WRITE_RETRIES):
        try:
            with store.session() as s:
                counts = [_count_one(s, subject, at) for subject in names]
            break
        except IntegrityError:
            if attempt == WRITE_RETRIES - 1:
                raise
    worst = max(counts, default=0)
    return worst, lock_after(worst).total_seconds()


def _count_one(s: Session, subject: str, at: dt.datetime) -> int:
    row = SignInFailures
    # One statement adds the failure, so that sessions failing at once all count; on
    # SQLite it takes the write lock and on PostgreSQL the row's, for the read that follows.
    matched = s.execute(
        update(row)
        .where(row.subject == subject)
        .values(
            failures=case((row.last_failed_at < at - RESET_AFTER, 1), else_=row.failures + 1),
            last_failed_at=at,
        )
    )
    if rows_matched(matched) == 0:
        s.add(SignInFailures(subject=subject, failures=1, last_failed_at=at, locked_until=None))
        s.flush()
        failures = 1
    else:
        failures = int(s.scalar(select(row.failures).where(row.subject == subject)) or 0)
    lock = lock_after(failures)
    if lock:
        s.execute(update(row).where(row.subject == subject).values(locked_until=at + lock))
    return failures


def record_success(store: HistoryStore, names: Sequence[str]) -> None:
    """A sign-in that succeeded: its name and address start again from nothing."""
    with store.session() as s:
        s.execute(delete(SignInFailures).where(SignInFailures.subject.in_(names)))
