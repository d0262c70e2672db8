"""The history store's schema version, kept by Alembic (migrations/ beside this file).

A store is used only at the version this drills expects (the migrations' head):
- a brand-new empty store is created at head on first use, with no step to run;
- any other version, or a store from before migrations (no ``alembic_version`` table), is
  refused with one line naming `drills db upgrade`, before anything reads or writes it;
- `drills db upgrade` brings any store to head, and is a no-op on one already there; it is
  also the only place where a store that had no evidence chain gets one (its records
  sealed as pre-chain);
- a reader that must not write (``drills evidence verify --db``) opens a store read-only:
  a store that does not exist is an error, never created.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, Table, exists, inspect, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from drills.errors import DrillError
from drills.store import chain
from drills.store.models import Base, EvidenceEntry, EvidenceMeta
from drills.text import first_line, redact_url

MIGRATIONS = Path(__file__).parent / "migrations"
BASELINE = "0001"  # the schema of drills 0.1.0, the last release without migrations
VERSION_TABLE = "alembic_version"
CREATING_WAIT_S = 10.0  # another process creating the same new store: wait this long for it


class SchemaError(DrillError):
    """The store is not at the schema this drills expects (or cannot be brought to it)."""


class StoreMissingError(SchemaError):
    """A store opened only to be read does not exist (a mistyped path, a database not there)."""


@dataclass(frozen=True)
class SchemaState:
    url: str
    current: str | None  # None: no version recorded (empty, or from before migrations)
    head: str
    tables: frozenset[str]

    @property
    def at_head(self) -> bool:
        return self.current == self.head

    @property
    def empty(self) -> bool:
        return not (self.tables - {VERSION_TABLE})

    def to_json(self) -> dict[str, object]:
        return {"url": self.url, "current": self.current, "head": self.head,
                "at_head": self.at_head}  # fmt: skip


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


@lru_cache(maxsize=1)
def head() -> str:
    revision = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert revision is not None, "the migrations have no head"
    return revision


def state(engine: Engine) -> SchemaState:
    with engine.connect() as conn:
        tables = frozenset(inspect(conn).get_table_names())
        current = MigrationContext.configure(conn).get_current_revision()
    return SchemaState(redact_url(str(engine.url)), current, head(), tables)


def ensure_current(engine: Engine) -> None:
    """Use a store only at head: create a brand-new one there, refuse any other.

    Two processes may open the same new store at once: the one that loses the race to
    create it waits for the other's version row instead of refusing a store half made.
    """
    deadline = time.monotonic() + CREATING_WAIT_S
    failed: Exception | None = None  # our own attempt to create it, if it failed
    while True:
        found = state(engine)
        if found.at_head:
            return
        if found.empty and found.current is None and VERSION_TABLE not in found.tables:
            try:
                _create_at_head(engine)
                return
            except Exception as exc:  # a race, or a real fault: see below
                failed = exc
                if VERSION_TABLE not in state(engine).tables:
                    raise _cannot_create(found, exc) from exc  # nobody else is creating it
        elif not (VERSION_TABLE in found.tables and found.current is None):
            raise _refusal(found)
        if time.monotonic() > deadline:
            raise _cannot_create(found, failed) if failed else _refusal(found)
        time.sleep(0.1)


def ensure_readable(engine: Engine) -> None:
    """A store opened read-only: it must exist, hold a history and be at head. Nothing
    is created or changed, whatever is found."""
    try:
        found = state(engine)
    except OperationalError as exc:
        reason = str(exc.orig or exc).strip().splitlines()[-1]
        if "does not exist" not in reason:
            raise  # a server down, refused: not a store that is not there
        raise StoreMissingError(
            f"no history store at {redact_url(str(engine.url))}: {reason}"
        ) from None
    if found.empty and found.current is None:
        raise StoreMissingError(f"{found.url} holds no history store")
    if not found.at_head:
        raise _refusal(found)


def _cannot_create(found: SchemaState, cause: Exception) -> SchemaError:
    reason = first_line(cause)
    return SchemaError(f"cannot create the history store {found.url}: {reason}")


def _refusal(found: SchemaState) -> SchemaError:
    if found.current is None:
        what = "was written before schema migrations (drills 0.1.0)"
    else:
        what = f"is at schema {found.current}, this drills needs {found.head}"
    return SchemaError(
        f"history store {found.url} {what}: run `drills db upgrade --db URL` first "
        "(it keeps every run)"
    )


def _create_at_head(engine: Engine) -> None:
    """A new store: the version table first (so that others wait), the tables, the version.

    create_all builds the same schema the migrations do (tests/store/test_migrations.py
    compares them), in one step instead of one per migration.
    """
    with engine.begin() as conn:
        context = MigrationContext.configure(conn)
        context._ensure_version_table()
    with engine.begin() as conn:
        Base.metadata.create_all(conn)
        # Chained from birth, in the transaction that makes it usable: a store at head
        # without this marker has had its chain removed.
        with Session(bind=conn) as session:
            session.add(EvidenceMeta(key=chain.UPGRADED_KEY, value=_now_iso()))
            session.flush()
        MigrationContext.configure(conn).stamp(
            ScriptDirectory.from_config(alembic_config()), head()
        )


# What drills 0.1.0 made (versions/0001_baseline.py), and no more: the models may hold
# tables and indexes that later migrations add, and a store adopted at the baseline must
# get those from their migrations, not before them.
BASELINE_TABLES = frozenset({
    "audit_log", "drill_runs", "evidence_chain", "evidence_meta", "journal", "leases",
    "readiness_snapshots",
})  # fmt: skip
BASELINE_INDEXES = frozenset({
    "ix_chain_run", "ix_journal_run_seq", "ix_run_finished", "ix_run_plan_mode_started",
    "ix_run_plan_started", "ix_run_started", "ix_snapshot_plan_time",
})  # fmt: skip


def _baseline_tables() -> list[Table]:
    return [t for t in Base.metadata.sorted_tables if t.name in BASELINE_TABLES]


def create_missing_indexes(engine: Engine) -> None:
    """The baseline's indexes a 0.1.0 store may lack: that release's create_all made them
    only with a new table, and added the rest on open."""
    inspector = inspect(engine)
    for table in _baseline_tables():
        have = {index["name"] for index in inspector.get_indexes(table.name)}
        for index in table.indexes:
            if index.name in BASELINE_INDEXES and index.name not in have:
                index.create(engine, checkfirst=True)


def upgrade(engine: Engine) -> tuple[str | None, str]:
    """Bring the store to head; returns (the version before, the version after).

    A store of drills 0.1.0 first gets whatever tables and indexes that release added to it
    on open (an older one may lack some), then is stamped at the baseline, then migrated.
    """
    before = state(engine)
    if before.at_head:
        return before.current, before.head
    if before.current is None and not before.empty:
        Base.metadata.create_all(engine, tables=_baseline_tables())
        create_missing_indexes(engine)
        with engine.begin() as conn:
            command.stamp(alembic_config(conn), BASELINE)
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "head")
    adopt_pre_chain(engine)
    return before.current, head()


def adopt_pre_chain(engine: Engine) -> int:
    """A store that never had an evidence chain (no marker, no link) gets one: what it
    holds is sealed as pre-chain. One that had a chain is left alone, even emptied: that
    is tampering to report, not records to adopt. Returns the records sealed."""
    marked = exists().where(EvidenceMeta.key == chain.UPGRADED_KEY)
    linked = exists().where(EvidenceEntry.id.isnot(None))
    with Session(engine) as session, session.begin():
        if session.execute(select(marked)).scalar() or session.execute(select(linked)).scalar():
            return 0
        return chain.upgrade(session)


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


__all__ = [
    "BASELINE",
    "MIGRATIONS",
    "SchemaError",
    "SchemaState",
    "StoreMissingError",
    "adopt_pre_chain",
    "alembic_config",
    "create_missing_indexes",
    "ensure_current",
    "ensure_readable",
    "head",
    "state",
    "upgrade",
]
