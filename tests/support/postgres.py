"""The session's PostgreSQL server (drills_lab.postgres), or the rule for a missing install."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from drills.store.history import HistoryStore
from drills_lab.postgres import PostgresServer, find_postgres_bin_dir
from tests.support.services import require_system_binary


def unstarted_server() -> PostgresServer:
    """A server to start; without PostgreSQL installed the test is skipped (failed under
    CI=true), as for every system binary the tests need."""
    bin_dir = find_postgres_bin_dir() or Path(require_system_binary("initdb", "postgresql")).parent
    return PostgresServer(bin_dir=bin_dir)


@contextmanager
def store_on(server: PostgresServer) -> Iterator[HistoryStore]:
    """A history store in a new database of ``server``, dropped afterwards."""
    url = server.create_database()
    store = HistoryStore(url)
    try:
        yield store
    finally:
        store.close()
        server.drop_database(url)


__all__ = ["PostgresServer", "store_on", "unstarted_server"]
