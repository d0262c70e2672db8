"""The database's clock: one clock for every host that shares the store.

Leases expire by it. Hosts' own clocks may disagree by any amount; a lease written
with one host's clock and judged with another's could be taken from a live holder
(or kept for a dead one). The store's server reads one clock for all of them.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

from drills.store.history import HistoryStore
from drills.store.models import UTCDateTime


class _DatabaseNow(FunctionElement[dt.datetime]):
    """The server's time now, in UTC, to the microsecond where the server has it."""

    type = UTCDateTime()
    inherit_cache = True


@compiles(_DatabaseNow)
def _now_default(_element: Any, _compiler: Any, **_kw: Any) -> str:
    # PostgreSQL: the time of this statement (now() would be the transaction's start).
    return "clock_timestamp()"


@compiles(_DatabaseNow, "sqlite")
def _now_sqlite(_element: Any, _compiler: Any, **_kw: Any) -> str:
    # CURRENT_TIMESTAMP has whole seconds only; %f gives milliseconds, padded to the
    # microseconds the store writes, so the text compares as the stored times do.
    return "strftime('%Y-%m-%d %H:%M:%f000', 'now')"


def database_now(store: HistoryStore) -> dt.datetime:
    """The store's clock now, an aware UTC datetime."""
    with store.session() as s:
        now = s.scalar(select(_DatabaseNow()))
    assert now is not None
    return now


__all__ = ["database_now"]
