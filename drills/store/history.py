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
from urllib.parse import quote

from sqlalchemy import URL, CursorResult, Engine, Select, create_engine, event, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from drills.store import chain, checkpoints, schema
from drills.store.kinds import Mode, RunStatus
from drills.store.models import (
    AuditEvent,
    DrillRun,
    EvidenceEntry,
    JournalEntry,
    ReadinessSnapshot,
)
from drills.store.url import check_store_url, store_errors
from drills.text import redact_url

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


def make_engine(url: str, *, read_only: bool = False) -> Engine:
    """An engine for the store at ``url``; StoreUrlError (one line) for a URL it cannot be.
    ``read_only``: one that can neither create nor change it (SQLite opened with
    ``mode=ro``, PostgreSQL transactions READ ONLY)."""
    parsed = check_store_url(url)
    if read_only:
        return _read_only_engine(url, parsed)
    connect_args: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
        # A server that accepts nothing (stopped by a signal, a dead route) must fail a
        # connection in bounded time, so a run waits for it on its own terms.
        connect_args["connect_timeout"] = PG_CONNECT_TIMEOUT_S
    with store_errors(url):
        if parsed.get_backend_name() == "sqlite" and parsed.database:
            Path(parsed.database).parent.mkdir(exist_ok=True)  # .drills/ of the default
        engine = create_engine(url, future=True, connect_args=connect_args)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _read_only_engine(url: str, parsed: URL) -> Engine:
    with store_errors(url):
        if parsed.get_backend_name() != "sqlite":
            engine = create_engine(url, future=True)
            return engine.execution_options(postgresql_readonly=True)
        path = parsed.database or ""
        if not Path(path).is_file():
            raise schema.StoreMissingError(f"no history store at {path}: no such file")
        uri = f"file:{quote(str(Path(path).resolve()))}"
        engine = create_engine(parsed.set(database=uri, query={"mode": "ro", "uri": "true"}))
    event.listen(engine, "connect", _sqlite_read_pragmas)
    return engine


def _sqlite_read_pragmas(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.execute("PRAGMA busy_timeout=10000")


class HistoryStore:
    """The store. ``read_only``: opened only to be read (nothing created or changed, and a
    tampered chain left for the reader to report); ``sign`` signs its checkpoints."""

    def __init__(
        self, url: str | None = None, *, read_only: bool = False,
        sign: checkpoints.Sign | None = None,
    ) -> None:  # fmt: skip
        self.url = url or database_url()
        self.read_only = read_only
        self.sign = sign
        self.engine = make_engine(self.url, read_only=read_only)
        try:
            with store_errors(self.url):  # unreachable, refused: one line, not a traceback
                if read_only:  # refused before anything reads or writes it
                    schema.ensure_readable(self.engine)
                else:
                    schema.ensure_current(self.engine)
        except BaseException:
            self.engine.dispose()
            raise
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        if not read_only:
            self._refuse_if_tampered()

    @property
    def shown_url(self) -> str:
        """The URL of the store as opened, fit to print: any password replaced by ***."""
        return self.engine.url.render_as_string(hide_password=True)

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

    def _refuse_if_tampered(self) -> None:
        """A store whose chain is gone or cut short is never used, nor sealed again: what
        it holds could say anything. `drills evidence verify --db` tells what is wrong."""
        with self.session() as s:
            problems = checkpoints.opening_problems(s)
        if problems:
            self.engine.dispose()
            raise checkpoints.ChainTamperedError(
                f"history store {redact_url(self.url)} has been tampered with: "
                f"{'; '.join(problems)}; nothing it holds can be trusted "
                "(`drills evidence verify --db URL` names what differs)"
            )

    def checkpoint(self, sealer: chain.Sealer, plan: str, reason: str) -> checkpoints.Checkpoint:
        """Keep a checkpoint of the plan's chain as ``sealer``'s transaction leaves it."""
        length, head = sealer.head(plan)
        return checkpoints.record(sealer.session, plan, length, head, reason, self.sign)

    def take_checkpoints(self, plans: Sequence[str] | None = None) -> list[checkpoints.Checkpoint]:
        """A checkpoint of each plan's chain head now (``plans``, or every plan that has a
        chain), kept in the store and returned, to be copied outside it."""

        def take(s: Session, sealer: chain.Sealer) -> list[checkpoints.Checkpoint]:
            names = plans
            if names is None:
                names = s.scalars(select(EvidenceEntry.plan).distinct()).all()
            return [self.checkpoint(sealer, plan, "export") for plan in sorted(set(names))]

        return self.write(take)

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
            for plan in dict.fromkeys(row.plan for row in saved):
                self.checkpoint(sealer, plan, "readiness")
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
            if run.finished_at is not None:
                self.checkpoint(sealer, run.plan, "run")

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
            if run.finished_at is not None:
                self.checkpoint(sealer, run.plan, "run")

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
