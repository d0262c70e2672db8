"""A database as someone with a SQL shell sees it: plain statements, no store in between."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from sqlalchemy import CursorResult, create_engine, text


class RawDatabase:
    """Runs SQL as written (``?`` placeholders, as in the sqlite3 shell) on SQLite or
    PostgreSQL, and commits when the ``with`` block ends."""

    def __init__(self, url: str) -> None:
        self._engine = create_engine(url)
        self._conn = self._engine.connect()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> CursorResult[Any]:
        numbers = itertools.count()
        named = re.sub(r"\?", lambda _: f":p{next(numbers)}", sql)
        return self._conn.execute(text(named), {f"p{i}": v for i, v in enumerate(params)})

    def __enter__(self) -> RawDatabase:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self._conn.commit()
        self._conn.close()
        self._engine.dispose()


# Columns of the baseline tables that later migrations added (0007: preemption_seconds,
# 0008: carry_seconds).
LATER_COLUMNS = (("drill_runs", "preemption_seconds"), ("drill_runs", "carry_seconds"))


def as_before_migrations(url: str) -> None:
    """Make a store made by this drills look as one the last release (0.1.0, no migrations)
    left: no alembic_version, and none of the tables or columns later migrations added."""
    from sqlalchemy import inspect

    from drills.store.schema import BASELINE_TABLES

    engine = create_engine(url)
    try:
        later = [t for t in inspect(engine).get_table_names() if t not in BASELINE_TABLES]
        columns = {
            (table, column)
            for table, column in LATER_COLUMNS
            if column in {c["name"] for c in inspect(engine).get_columns(table)}
        }
    finally:
        engine.dispose()
    with RawDatabase(url) as conn:
        for table in later:  # alembic_version among them
            conn.execute(f"DROP TABLE {table}")
        for table, column in sorted(columns):
            conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
