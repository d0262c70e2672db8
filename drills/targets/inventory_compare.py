"""Compare a dataset's two copies from their S3 Inventory reports, joined by DuckDB.

Each side's report files (CSV.gz or Parquet, on local disk) are loaded into a DuckDB
database kept in a scratch directory, narrowed to the dataset's prefix and to the
current version of each key; the two tables are joined on the key, and only the keys
that are not the same on both sides are kept, with counts and the first examples.
DuckDB spills to the scratch directory past its memory limit, so a bucket of any size
fits in bounded memory.

The verdicts are the listing's (:mod:`drills.targets.objects.compare`), with one
difference: a report holds no full-object checksum, so a pair whose multipart ETags
differ at the same size is *unverified*.

Objects written after a report are in none of its rows. Keys under ``recent``
prefixes (the dataset's date partitions since the older report) are therefore taken
from a fresh listing of both sides instead of the reports.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from drills.errors import PermanentError
from drills.targets.inventory import Manifest
from drills.targets.objects import DatasetDiff, ObjectInfo

_COLUMNS = "key VARCHAR, size BIGINT, etag VARCHAR, lm TIMESTAMPTZ"
MEMORY_LIMIT = "128MB"  # DuckDB's own; it spills to the scratch directory past it
THREADS = 2


@dataclass(frozen=True)
class InventorySide:
    """One side's report, its files on local disk, and the fresh listing of its recent part."""

    where: str  # s3://bucket/prefix of the dataset
    target: str  # the object store, for errors
    manifest: Manifest
    paths: Sequence[Path]
    prefix: str  # the dataset's prefix
    recent: Iterable[ObjectInfo] = field(default=())


def _csv_source(side: InventorySide) -> str:
    m = side.manifest
    columns = ", ".join(f"'{name}': 'VARCHAR'" for name in m.fields)
    files = _paths(side)
    # CSV reports URL-encode the key, form-style: '+' is a space.
    key = "url_decode(replace(\"Key\", '+', ' '))"
    lm = 'try_cast("LastModifiedDate" AS TIMESTAMPTZ)' if m.has("LastModifiedDate") else "NULL"
    where = _latest_filter(m, "\"IsLatest\" = 'true'", "\"IsDeleteMarker\" = 'true'")
    return (
        f'SELECT {key} AS key, try_cast("Size" AS BIGINT) AS size, '
        f'trim("ETag", \'"\') AS etag, {lm} AS lm '
        f"FROM read_csv({files}, header = false, columns = {{{columns}}}, quote = '\"', "
        f"compression = 'gzip', auto_detect = false) {where}"
    )


def _parquet_source(side: InventorySide) -> str:
    m = side.manifest
    lm = "last_modified_date::TIMESTAMPTZ" if m.has("LastModifiedDate") else "NULL"
    where = _latest_filter(m, "is_latest", "is_delete_marker")
    return (
        f"SELECT key, size, trim(e_tag, '\"') AS etag, {lm} AS lm "
        f"FROM read_parquet({_paths(side)}) {where}"
    )


def _latest_filter(m: Manifest, latest: str, deleted: str) -> str:
    """A report of all versions lists each: keep the current one, never a delete marker."""
    parts = ["TRUE"]
    if m.has("IsLatest"):
        parts.append(f"coalesce({latest}, TRUE)")
    if m.has("IsDeleteMarker"):
        parts.append(f"NOT coalesce({deleted}, FALSE)")
    return "WHERE " + " AND ".join(parts)


def _paths(side: InventorySide) -> str:
    quoted = ", ".join("'" + str(p).replace("'", "''") + "'" for p in side.paths)
    return f"[{quoted}]"


def _view(
    con: duckdb.DuckDBPyConnection, name: str, side: InventorySide, recent: list[str]
) -> None:
    """``name``: the side's rows under the dataset's prefix, the recent part from the listing."""
    source = _csv_source(side) if side.manifest.file_format == "CSV" else _parquet_source(side)
    keep = [_literal_prefix("key", side.prefix, negate=False)] if side.prefix else []
    keep += [_literal_prefix("key", part, negate=True) for part in recent]
    if keep:
        source = f"SELECT * FROM ({source}) WHERE {' AND '.join(keep)}"
    rows = [(o.key, o.size, o.etag, o.last_modified) for o in side.recent]
    if rows:
        con.execute(f"CREATE TABLE {name}_recent ({_COLUMNS})")
        con.executemany(f"INSERT INTO {name}_recent VALUES (?, ?, ?, ?)", rows)
        source = f"{source} UNION ALL SELECT * FROM {name}_recent"
    con.execute(f"CREATE VIEW {name} AS {source}")


def _literal_prefix(column: str, prefix: str, *, negate: bool) -> str:
    quoted = "'" + prefix.replace("'", "''") + "'"
    return f"{'NOT ' if negate else ''}starts_with({column}, {quoted})"


# Each side's rows with no identical row (same key, same size and ETag) on the other side:
# two anti-joins, which DuckDB runs in bounded memory far faster than one full outer join
# of ten million rows with their payload. Only these few rows are joined in full. The
# other side is held as two 64-bit hashes a row, not its keys: a row counts as present
# only when both the key's hash and the hash of (key, size, ETag) are equal, which two
# different rows are not (2^-128), and a smaller hash table spills less.
_ONLY = """
CREATE TABLE {name}_only AS
SELECT a.* FROM {a} a
ANTI JOIN (SELECT hash(key) AS hk, hash(key, size, etag) AS fp FROM {b}) b
ON hash(a.key) = b.hk AND hash(a.key, a.size, a.etag) = b.fp
"""

_VERDICTS = """
CREATE TABLE problems AS
SELECT coalesce(p.key, d.key) AS key, p.size AS p_size, p.etag AS p_etag, p.lm AS p_lm,
       d.size AS d_size, d.etag AS d_etag, d.lm AS d_lm,
       CASE WHEN p.key IS NULL THEN 'extra'
            WHEN d.key IS NOT NULL AND p.size = d.size
                 AND (contains(p.etag, '-') OR contains(d.etag, '-')) THEN 'unverified'
            WHEN p.lm > $pending_after THEN 'pending'
            WHEN d.key IS NULL THEN 'missing'
            ELSE 'mismatched' END AS verdict,
       CASE WHEN d.key IS NULL OR p.key IS NULL THEN ''
            WHEN p.size <> d.size THEN 'size'
            ELSE 'etag' END AS reason
FROM p_only p FULL OUTER JOIN d_only d ON p.key = d.key
"""


def compare_inventories(
    primary: InventorySide,
    dr: InventorySide,
    *,
    examples: int,
    scratch: Path,
    pending_after: dt.datetime | None = None,
    recent_prefixes: Sequence[str] = (),
) -> DatasetDiff:
    """Join both reports by key in DuckDB; the diff the listing comparison would give."""
    diff = DatasetDiff(primary.where, dr.where, examples, pending_after=pending_after)
    con = duckdb.connect()
    try:
        con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        con.execute(f"SET threads = {THREADS}")
        con.execute("SET preserve_insertion_order = false")
        con.execute(f"SET temp_directory = '{scratch / 'spill'}'")
        recent = list(recent_prefixes)
        for name, side in (("p", primary), ("d", dr)):
            _view(con, name, side, recent)
        after = pending_after or dt.datetime.max.replace(tzinfo=dt.UTC)
        for name, a, b, side in (("p", "p", "d", primary), ("d", "d", "p", dr)):
            _run(con, side, _ONLY.format(name=name, a=a, b=b))
        con.execute(_VERDICTS, {"pending_after": after})
        _fill(con, diff)
    finally:
        con.close()
    return diff


def _run(con: duckdb.DuckDBPyConnection, side: InventorySide, sql: str) -> None:
    try:
        con.execute(sql)
    except duckdb.Error as exc:
        raise PermanentError(
            side.target,
            f"inventory report {side.manifest.where} could not be read: {str(exc).splitlines()[0]}",
        ) from None


def _info(row: tuple[Any, ...] | None) -> ObjectInfo | None:
    if row is None or row[3] is None:
        return None
    return ObjectInfo(row[0], row[1], row[2], row[3].astimezone(dt.UTC))


def _side(con: duckdb.DuckDBPyConnection, name: str) -> tuple[int, ObjectInfo | None]:
    """How many rows a side has and its newest object: one scan."""
    row = con.execute(
        f"SELECT count(*), arg_max(key, lm), arg_max(size, lm), arg_max(etag, lm), max(lm) "
        f"FROM {name}"
    ).fetchone()
    assert row is not None
    return row[0], _info(row[1:])


def _fill(con: duckdb.DuckDBPyConnection, diff: DatasetDiff) -> None:
    one = con.execute
    diff.primary_objects, diff.newest_primary = _side(con, "p")
    diff.dr_objects, diff.newest_dr = _side(con, "d")
    tallies = {
        "missing": diff.missing, "mismatched": diff.mismatched, "extra": diff.extra,
        "unverified": diff.unverified, "pending": diff.pending,
    }  # fmt: skip
    for verdict, count in one("SELECT verdict, count(*) FROM problems GROUP BY verdict").fetchall():
        tallies[verdict].count = count
    for verdict, tally in tallies.items():
        rows = one(
            "SELECT key, p_size, p_etag, p_lm, d_size, d_etag, reason FROM problems "
            "WHERE verdict = ? ORDER BY key LIMIT ?",
            [verdict, diff.examples],
        ).fetchall()
        tally.examples = [_example(verdict, row) for row in rows]
    diff.matched = diff.primary_objects - sum(
        tallies[v].count for v in ("missing", "mismatched", "unverified", "pending")
    )
    diff.oldest_unreplicated = _info(
        one(
            "SELECT key, p_size, p_etag, p_lm FROM problems WHERE verdict IN "
            "('missing', 'mismatched', 'pending') AND p_lm IS NOT NULL ORDER BY p_lm LIMIT 1"
        ).fetchone()
    )
    if diff.newest_primary is not None:
        lacking = one(
            "SELECT count(*) FROM problems WHERE key = ? AND verdict IN "
            "('missing', 'mismatched', 'pending')",
            [diff.newest_primary.key],
        ).fetchone()
        diff.newest_primary_at_dr = lacking is not None and lacking[0] == 0


def _example(verdict: str, row: tuple[Any, ...]) -> dict[str, Any]:
    """An example shaped as the listing comparison gives it."""
    key, p_size, p_etag, p_lm, d_size, d_etag, reason = row
    if verdict == "extra":
        return {"key": key, "size": d_size}
    if d_size is None:  # missing, or pending and missing
        when = p_lm.astimezone(dt.UTC).isoformat(timespec="seconds") if p_lm else None
        found = {"key": key, "size": p_size, "last_modified": when}
        return found | ({"reason": "missing"} if verdict == "pending" else {})
    pair = {
        "key": key,
        "primary": {"size": p_size, "etag": p_etag},
        "dr": {"size": d_size, "etag": d_etag},
    }
    if verdict == "unverified":
        return pair | {"reason": "multipart ETags differ; an inventory report holds no checksum"}
    return pair | {"reason": reason}
