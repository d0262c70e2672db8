"""Rows written in bulk, past the chain: for benchmarks that fill a store with a fleet's
history. Nothing here seals what it writes; a store filled so is a stand-in, not evidence.

The load itself is recorded, as one sealed audit event: a store that holds final records
and no chain at all is refused on opening (drills.store.checkpoints), and this one says
what it is. `drills evidence verify --db` names every record written past the chain.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import insert, text

from drills.store.history import HistoryStore
from drills.store.models import Base

Rows = Sequence[dict[str, Any]]  # column -> value, every row of a batch with the same columns
TableRows = tuple[type[Base], Iterable[Rows]]  # a table's model and its batches of rows
BULK_PLAN = "(bulk load)"  # the audit event's plan: none of the plans loaded, all of them


def load(store: HistoryStore, *tables: TableRows) -> None:
    """Every batch of every table inserted, in order, in one transaction."""
    written: dict[str, int] = {}
    with store.session() as s:
        for model, batches in tables:
            for rows in batches:
                s.execute(insert(model), rows)
                _count(written, model, rows)
    _record(store, written)


def load_fast(store: HistoryStore, *tables: TableRows) -> None:
    """As :func:`load`, but on PostgreSQL by COPY FROM STDIN (several times an INSERT's
    speed), then VACUUM ANALYZE: the planner's statistics and visibility map as a store in
    service has them."""
    if store.engine.dialect.name != "postgresql":
        load(store, *tables)
        return
    written: dict[str, int] = {}
    for model, batches in tables:
        _copy(store, model, batches, written)
    with store.engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("VACUUM ANALYZE"))
    _record(store, written)


def _count(written: dict[str, int], model: type[Base], rows: Rows) -> None:
    written[model.__tablename__] = written.get(model.__tablename__, 0) + len(rows)


def _record(store: HistoryStore, written: dict[str, int]) -> None:
    reason = f"{sum(written.values())} rows written in bulk, unsealed"
    store.audit(
        who="drills.store.bulk", action="bulk-load", plan=BULK_PLAN, accepted=True,
        reason=reason, detail={"rows": written},
    )  # fmt: skip


def _copy(
    store: HistoryStore, model: type[Base], batches: Iterable[Rows], written: dict[str, int]
) -> None:
    """COPY FROM STDIN, the JSON columns as text."""
    table = model.__tablename__
    raw = store.engine.raw_connection()
    try:
        with raw.driver_connection.cursor() as cursor:  # type: ignore[union-attr]
            for rows in batches:
                _count(written, model, rows)
                columns = ", ".join(rows[0])
                with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row([json.dumps(v) if isinstance(v, dict | list) else v
                                        for v in row.values()])  # fmt: skip
        raw.commit()
    finally:
        raw.close()
