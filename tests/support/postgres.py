"""The session's PostgreSQL server (drills.lab.postgres), or the rule for a missing install."""

from __future__ import annotations

from pathlib import Path

from drills.lab.postgres import PostgresServer, find_postgres_bin_dir
from tests.support.services import require_system_binary


def unstarted_server() -> PostgresServer:
    """A server to start; without PostgreSQL installed the test is skipped (failed under
    CI=true), as for every system binary the tests need."""
    bin_dir = find_postgres_bin_dir() or Path(require_system_binary("initdb", "postgresql")).parent
    return PostgresServer(bin_dir=bin_dir)


__all__ = ["PostgresServer", "unstarted_server"]
