"""When the history store cannot be reached, and whether its commits survive a crash.

A store outage (PostgreSQL stopped or unreachable, SQLite on a full or read-only disk) is
told apart from a bug of ours: a run survives the first (drills.takeover.write_ahead), not
the second.

A PostgreSQL store with ``synchronous_commit`` or ``fsync`` off acknowledges commits it may
lose in a crash: the last entries of a run's journal, so `drills recover` would not know
every change. A takeover refuses such a store unless ``DRILLS_ALLOW_NONDURABLE_STORE=1``
(the test suite's throwaway server runs so on purpose, for speed).
"""

from __future__ import annotations

import os

from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

ALLOW_NONDURABLE_ENV = "DRILLS_ALLOW_NONDURABLE_STORE"
# Settings under which PostgreSQL acknowledges a commit before it is on disk.
_DURABLE = {"synchronous_commit": ("off",), "fsync": ("off",)}


def is_store_outage(exc: BaseException) -> bool:
    """The store could not be reached or written (connection refused or dropped, disk
    full, database read-only); not a statement of ours that is wrong."""
    if isinstance(exc, (OperationalError, InterfaceError)):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


def outage_text(exc: BaseException) -> str:
    """The store's own one-line reason (the driver's message), without SQLAlchemy's
    statement and parameters."""
    cause = getattr(exc, "orig", None) or exc
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0] if lines else ''}"


def nondurable_settings(engine: Engine) -> list[str]:
    """The settings, as ``name=value``, under which the store may lose acknowledged
    commits in a crash; empty for a durable store (and for SQLite, whose committed
    transactions survive a crash of the process)."""
    if engine.dialect.name != "postgresql":
        return []
    found = []
    with engine.connect() as conn:
        for name, unsafe in _DURABLE.items():
            value = str(conn.execute(text(f"SHOW {name}")).scalar())
            if value.lower() in unsafe:
                found.append(f"{name}={value}")
    return found


def nondurable_allowed() -> bool:
    return os.environ.get(ALLOW_NONDURABLE_ENV, "") == "1"


def nondurable_message(settings: list[str]) -> str:
    return (
        f"the history store does not make its commits durable ({', '.join(settings)}): a "
        "crash of its server can lose the last entries of a run's journal. Turn them on, or "
        f"set {ALLOW_NONDURABLE_ENV}=1 to run on it anyway"
    )


__all__ = [
    "ALLOW_NONDURABLE_ENV",
    "is_store_outage",
    "nondurable_allowed",
    "nondurable_message",
    "nondurable_settings",
    "outage_text",
]
