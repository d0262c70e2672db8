"""Which history stores drills opens, and what it says about one it cannot.

A store URL comes from an operator (``--db``, ``DRILLS_DB_URL``), so it is input like any
other: a typo, a driver that is not installed, a port out of range, a directory, a
server that is down. Each is one line naming the store, its password never shown, and
never a traceback. The store is SQLite (a file) or PostgreSQL (with the psycopg driver):
SQLAlchemy would take other URLs and fail later, in the middle of a run.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError

from drills.errors import DrillError
from drills.text import for_terminal, redact_url

EXAMPLES = "sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"
_ASYNC_DRIVERS = frozenset({"asyncpg", "aiosqlite", "pysqlite_async", "psycopg_async"})


# Any error the store's database layer raises (a query refused, a connection lost): callers
# that turn one into their own error catch it by this name.
StoreQueryError = SQLAlchemyError


class StoreUrlError(DrillError):
    """The history store named cannot be opened; the message is one line, no password."""


class StoreUnreachableError(StoreUrlError):
    """The URL is well formed, but the store behind it did not open (down, refused, no
    driver, no such database)."""


def _shown(url: str) -> str:
    return redact_url(url) if url else "''"


def check_store_url(url: str) -> URL:
    """``url`` parsed, if it names a store drills can open; else StoreUrlError saying why.

    Only the form is checked here; whether the store answers is found on connecting.
    """
    if not url.strip():
        raise StoreUrlError(
            f"the history store URL is empty; give one such as {EXAMPLES} "
            "(or unset DRILLS_DB_URL for the default .drills/history.db)"
        )
    try:
        parsed = make_url(url)
        port = parsed.port
    except (ArgumentError, ValueError):
        raise StoreUrlError(
            f"{_shown(url)} is not a history store URL; give one such as {EXAMPLES}"
        ) from None
    # From the URL's text: get_driver_name() loads the dialect, which may not exist.
    backend, _, driver = parsed.drivername.partition("+")
    if backend not in ("sqlite", "postgresql"):
        raise StoreUrlError(
            f"{_shown(url)}: the history store is SQLite or PostgreSQL, not {backend!r}; "
            f"give a URL such as {EXAMPLES}"
        )
    if driver in _ASYNC_DRIVERS or driver.endswith("_async"):
        raise StoreUrlError(
            f"{_shown(url)}: the async driver {driver!r} cannot serve the history store; "
            "use postgresql+psycopg://"
        )
    if port is not None and not 0 < port < 65536:
        raise StoreUrlError(f"{_shown(url)}: port {port} is not a port (1-65535)")
    if backend == "sqlite":
        _check_sqlite_path(url, parsed.database)
    return parsed


def _check_sqlite_path(url: str, database: str | None) -> None:
    if not database or database == ":memory:" or database.startswith("file::memory:"):
        raise StoreUrlError(
            f"{_shown(url)} is an in-memory SQLite database: it keeps nothing after the "
            "command; give a file, such as sqlite:///.drills/history.db"
        )
    path = Path(database)
    if path.is_dir():
        raise StoreUrlError(f"{_shown(url)}: {database} is a directory; give a file in it")
    if not path.parent.is_dir() and not path.parent.parent.is_dir():
        # One missing level is made (.drills/ of the default); more is a typo.
        raise StoreUrlError(f"{_shown(url)}: the directory {path.parent} does not exist")


def store_failure(url: str, exc: BaseException) -> StoreUnreachableError:
    """``exc``, met opening or first reading the store at ``url``, as one line."""
    shown = _shown(url)
    if isinstance(exc, NoSuchModuleError | ModuleNotFoundError | ImportError):
        return StoreUnreachableError(
            f"{shown}: its database driver is not installed here; for PostgreSQL install "
            "drills[postgres] and use postgresql+psycopg://"
        )
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        reason = str(exc.orig)
    elif isinstance(exc, sqlite3.Error | OSError):
        reason = str(exc)
    else:
        reason = type(exc).__name__
    line = next((ln.strip() for ln in reason.splitlines() if ln.strip()), type(exc).__name__)
    password = _password(url)
    if password:
        line = line.replace(password, "***")
    return StoreUnreachableError(f"cannot open the history store {shown}: {for_terminal(line)}")


def _password(url: str) -> str | None:
    try:
        return make_url(url).password
    except (ArgumentError, ValueError):
        return None


@contextmanager
def store_errors(url: str) -> Iterator[None]:
    """Errors opening the store at ``url`` become StoreUrlError (one line, no password)."""
    try:
        yield
    except StoreUrlError:
        raise
    except (SQLAlchemyError, sqlite3.Error, OSError, ImportError) as exc:
        raise store_failure(url, exc) from exc


# -- a store URL as other parts of drills read it, parsed as the engine parses it ----------
def sqlite_path(url: str) -> str | None:
    """The file of a SQLite store's URL; None for another backend, or no file."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database:
        return parsed.database
    return None


def url_without_password(url: str) -> str:
    """``url`` fit to print: any password replaced by ***."""
    return make_url(url).render_as_string(hide_password=True)


def url_password(url: str) -> str | None:
    return make_url(url).password


def url_backend(url: str) -> str:
    """The database a URL names ("sqlite", "postgresql", ...), whatever its driver."""
    return make_url(url).get_backend_name()


def with_driver(url: str, drivername: str) -> str:
    """``url`` (its password kept) with another driver, e.g. ``sqlite+aiosqlite``."""
    return make_url(url).set(drivername=drivername).render_as_string(hide_password=False)
