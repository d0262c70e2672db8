"""The history store: readiness snapshots, drill runs, their journal, leases, audit.

SQLite by default (``.drills/history.db`` under the working directory);
``DRILLS_DB_URL`` points it elsewhere, e.g. PostgreSQL for a team
(``postgresql+psycopg://...``). A store is used only at the schema version this drills
expects (drills.store.schema); `drills db upgrade` brings an older one there. Readers page
and filter in SQL, never load every run.
"""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import CursorResult, Engine, Select, create_engine, event, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from drills.store import chain, schema
from drills.store.kinds import Mode, RunStatus
from drills.store.models import (
    AuditEvent,
    DrillRun,
    EvidenceMeta,
    JournalEntry,
    ReadinessSnapshot,
)

DEFAULT_URL = "sqlite:///.drills/history.db"
Query = TypeVar("Query", bound=Select[Any])
# A snapshot to keep: plan, checked_at, ok, blocking count, report.
SnapshotRow = tuple[str, dt.datetime, bool, int, dict[str, Any]]
T = TypeVar("T")
SQLITE_WAL_WAIT_S = 10.0
PG_CONNECT_TIMEOUT_S = 10
CHAIN_RETRIES = 8  # writers racing for a plan's next link: each loser writes again


def rows_matched(result: Any) -> int:
    """Rows an UPDATE or DELETE matched (their result is always a CursorResult)."""
    assert isinstance(result, CursorResult)
    return int(result.rowcount)


def database_url() -> str:
    return os.environ.get("DRILLS_DB_URL", DEFAULT_URL)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    # The busy timeout rides out short locks.
    cursor.execute("PRAGMA busy_timeout=10000")
    _use_wal(cursor)
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _use_wal(cursor: Any) -> None:
    """WAL lets the UI read while a drill writes. The mode stays with the file, so only a
    new store switches; SQLite answers "locked" at once, not after the busy timeout, when
    processes opening a new store switch it together, so the losers look again."""
    deadline = time.monotonic() + SQLITE_WAL_WAIT_S
    if cursor.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
        return
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")  # an in-memory store stays "memory"
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def filter_runs(
    query: Query,
    *,
    plan: str | None = None,
    mode: str | None = None,
    verdict: str | None = None,
) -> Query:
    """A query of runs narrowed to a plan, a mode and a verdict, each only when given."""
    if plan:
        query = query.where(DrillRun.plan == plan)
    if mode:
        query = query.where(DrillRun.mode == mode)
    if verdict:
        query = query.where(DrillRun.verdict == verdict)
    return query


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite:///") and not url.startswith("sqlite:///:memory:"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    connect_args: dict[str, Any] = {}
    if url.startswith("postgresql") and "connect_timeout" not in url:
        # A server that accepts nothing (stopped by a signal, a dead route) must fail a
        # connection in bounded time, so a run waits for it on its own terms.
        connect_args["connect_timeout"] = PG_CONNECT_TIMEOUT_S
    engine = create_engine(url, future=True, connect_args=connect_args)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


class HistoryStore:
    def __init__(self, url: str | None = None) -> None:
        self.url = url or database_url()
        self.engine = make_engine(self.url)
        try:
            schema.ensure_current(self.engine)  # refused before anything reads or writes it
        except BaseException:
            self.engine.dispose()
            raise
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._upgrade_chain()

    @contextmanager
    def session(self) -> Iterator[Session]:
        with self._sessions.begin() as session:
            yield session

    def write(self, work: Callable[[Session, chain.Sealer], T]) -> T:
        """A write that appends to the evidence chain, in one transaction with its record.

        ``work`` writes the record first (on SQLite that takes the write lock, so the
        chain's head read next is the newest), then seals it. Two writers that still
        read the same head collide on the chain's unique (plan, seq): the loser's whole
        transaction is rolled back and run again.
        """
        for attempt in range(CHAIN_RETRIES):
            try:
                with self.session() as s:
                    return work(s, chain.Sealer(s))
            except IntegrityError as exc:
                if "evidence_chain" not in str(exc) and "ux_chain_plan_seq" not in str(exc):
                    raise
                if attempt == CHAIN_RETRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def _upgrade_chain(self) -> None:
        """A store made before the evidence chain gets one, its records sealed as pre-chain."""
        with self.session() as s:
            if s.get(EvidenceMeta, chain.UPGRADED_KEY) is not None:
                return
        try:
            with self.session() as s:
                chain.upgrade(s)
        except IntegrityError:
            pass  # another process upgraded it at the same moment

    def close(self) -> None:
        self.engine.dispose()

    # -- readiness -----------------------------------------------------------
    def save_readiness(
        self, plan: str, checked_at: dt.datetime, ok: bool, blocking: int, report: dict[str, Any]
    ) -> int:
        return self.save_readiness_many([(plan, checked_at, ok, blocking, report)])[0]

    def save_readiness_many(self, rows: Sequence[SnapshotRow]) -> list[int]:
        """Keep many snapshots (plan, checked_at, ok, blocking, report) in one transaction,
        each sealed in the evidence chain: a fleet's run writes once, not once per plan."""

        def save(s: Session, sealer: chain.Sealer) -> list[int]:
            saved = [
                ReadinessSnapshot(plan=p, checked_at=at, ok=ok, blocking=blocking, report=report)
                for p, at, ok, blocking, report in rows
            ]
            s.add_all(saved)
            s.flush()
            for row in saved:
                sealer.seal_row(ReadinessSnapshot, row.id)
            return [row.id for row in saved]

        return self.write(save) if rows else []

    def latest_readiness(self, plan: str) -> ReadinessSnapshot | None:
        return self.latest_readiness_of([plan]).get(plan)

    def latest_readiness_of(self, plans: Sequence[str]) -> dict[str, ReadinessSnapshot]:
        """The latest snapshot of each plan that has one (one index step per plan)."""
        found = {}
        with self.session() as s:
            for plan in dict.fromkeys(plans):
                query = (
                    select(ReadinessSnapshot)
                    .where(ReadinessSnapshot.plan == plan)
                    .order_by(ReadinessSnapshot.checked_at.desc())
                    .limit(1)
                )
                snapshot = s.scalars(query).first()
                if snapshot is not None:
                    found[plan] = snapshot
        return found

    # -- runs ----------------------------------------------------------------
    def last_successful_drill(self, plan: str) -> DrillRun | None:
        """The newest run that counts for the drill cadence."""
        proving = [status for status in RunStatus if status.counts_for_cadence]
        with self.session() as s:
            query = (
                select(DrillRun)
                .where(
                    DrillRun.plan == plan,
                    DrillRun.mode == Mode.DRILL,
                    DrillRun.dry_run.is_(False),
                    DrillRun.status.in_(proving),
                )
                .order_by(DrillRun.started_at.desc())
                .limit(1)
            )
            return s.scalars(query).first()

    def create_run(self, run: DrillRun) -> None:
        def create(s: Session, sealer: chain.Sealer) -> None:
            s.add(run)
            s.flush()
            sealer.seal_run(run.id)  # a run recorded already finished is sealed at once

        self.write(create)

    def update_run(self, run_id: str, **fields: Any) -> None:
        """Write some of a run's fields; its ended steps, and the run once finished, are
        sealed in the evidence chain as they now stand."""

        def update(s: Session, sealer: chain.Sealer) -> None:
            run = s.get(DrillRun, run_id)
            if run is None:
                raise KeyError(run_id)
            for name, value in fields.items():
                setattr(run, name, value)
            sealer.seal_run(run_id)

        self.write(update)

    def get_run(self, run_id: str) -> DrillRun | None:
        with self.session() as s:
            return s.get(DrillRun, run_id)

    def find_run(self, prefix: str) -> DrillRun | None:
        """A run by its id or an unambiguous prefix of it, as people type them."""
        with self.session() as s:
            exact = s.get(DrillRun, prefix)
            if exact is not None:
                return exact
            found = s.scalars(
                select(DrillRun).where(DrillRun.id.startswith(prefix, autoescape=True)).limit(2)
            ).all()
            return found[0] if len(found) == 1 else None

    def list_runs(
        self,
        *,
        plan: str | None = None,
        mode: str | None = None,
        verdict: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[DrillRun]:
        """Runs newest first, filtered and paged in SQL."""
        query = filter_runs(select(DrillRun), plan=plan, mode=mode, verdict=verdict)
        query = query.order_by(DrillRun.started_at.desc()).limit(limit).offset(offset)
        with self.session() as s:
            return list(s.scalars(query).all())

    def unfinished_runs(self, plan: str) -> list[DrillRun]:
        with self.session() as s:
            query = (
                select(DrillRun)
                .where(DrillRun.plan == plan, DrillRun.finished_at.is_(None))
                .order_by(DrillRun.started_at.desc())
            )
            return list(s.scalars(query).all())

    def journal(self, run_id: str) -> list[JournalEntry]:
        """A run's journal, in the order its changes were made."""
        with self.session() as s:
            query = select(JournalEntry).where(JournalEntry.run_id == run_id)
            return list(s.scalars(query.order_by(JournalEntry.seq)).all())

    # -- audit ---------------------------------------------------------------
    def audit(
        self,
        *,
        who: str,
        action: str,
        plan: str,
        accepted: bool,
        reason: str,
        detail: dict[str, Any] | None = None,
    ) -> None:

        def write(s: Session, sealer: chain.Sealer) -> None:
            event = AuditEvent(
                at=dt.datetime.now(dt.UTC),
                who=who,
                action=action,
                plan=plan,
                accepted=accepted,
                reason=reason,
                detail=detail or {},
            )
            s.add(event)
            s.flush()
            sealer.seal_row(AuditEvent, event.id)

        self.write(write)
