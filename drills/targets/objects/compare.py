"""Compare a dataset's primary and DR copies as two key-ordered streams (a merge-join).

Both listings are fetched concurrently by their own threads and consumed here
one entry at a time, so memory stays bounded by the listings' buffers whatever
the bucket holds; only counts and the first examples of each problem are kept.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from drills.errors import PermanentError
from drills.targets.objects.listing import BufferGauge
from drills.targets.objects.store import CHECKSUM_FIELDS, KeyHistory, ObjectInfo, ObjectStore

log = logging.getLogger("drills.targets.objects")

Verdict = Literal["match", "mismatch", "unverified"]


def _when(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat(timespec="seconds")


@dataclass
class Tally:
    """How often one problem occurred, and its first examples."""

    limit: int
    count: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)

    def add(self, example: dict[str, Any]) -> None:
        self.count += 1
        if len(self.examples) < self.limit:
            self.examples.append(example)


@dataclass(frozen=True)
class Location:
    store: ObjectStore
    bucket: str
    prefix: str

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


@dataclass
class DatasetDiff:
    """What one streaming pass over both copies of a dataset found."""

    primary: str  # s3://bucket/prefix
    dr: str
    examples: int
    # Primary objects written after this, not (yet) the same at DR, are pending, not
    # missing: replication takes time, and a live bucket always has some in flight.
    pending_after: dt.datetime | None = None
    primary_objects: int = 0
    dr_objects: int = 0
    matched: int = 0
    missing: Tally = field(init=False)
    mismatched: Tally = field(init=False)
    extra: Tally = field(init=False)
    unverified: Tally = field(init=False)
    pending: Tally = field(init=False)
    oldest_unreplicated: ObjectInfo | None = None  # primary object missing or different at DR
    newest_primary: ObjectInfo | None = None
    newest_dr: ObjectInfo | None = None
    newest_primary_at_dr: bool = False
    primary_gauge: BufferGauge = field(default_factory=BufferGauge)
    dr_gauge: BufferGauge = field(default_factory=BufferGauge)
    # Set when the diff was made from S3 Inventory reports: their age, format, coverage.
    inventory: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        for name in ("missing", "mismatched", "extra", "unverified", "pending"):
            setattr(self, name, Tally(self.examples))

    @property
    def unreplicated(self) -> int:
        """Primary objects DR does not (yet) hold: missing, different or pending."""
        return self.missing.count + self.mismatched.count + self.pending.count

    @property
    def incomplete(self) -> bool:
        """DR lacks primary objects older than the pending window."""
        return bool(self.missing.count or self.mismatched.count)

    def counts(self) -> dict[str, int]:
        return {
            "primary_objects": self.primary_objects,
            "dr_objects": self.dr_objects,
            "matched": self.matched,
            "missing": self.missing.count,
            "mismatched": self.mismatched.count,
            "extra": self.extra.count,
            "unverified": self.unverified.count,
            "pending": self.pending.count,
        }

    def problem_examples(self) -> dict[str, list[dict[str, Any]]]:
        tallies = {
            "missing": self.missing,
            "mismatched": self.mismatched,
            "extra": self.extra,
            "unverified": self.unverified,
            "pending": self.pending,
        }
        return {name: tally.examples for name, tally in tallies.items() if tally.examples}


def _ordered(items: Iterator[Any], where: Location) -> Iterator[Any]:
    """Pass the stream through, refusing one out of key order: a merge-join needs order."""
    last: str | None = None
    for item in items:
        if last is not None and item.key <= last:
            raise PermanentError(
                where.store.target,
                f"listing of {where} is not in key order ({item.key!r} after {last!r})",
            )
        last = item.key
        yield item


def _comparable(sums: dict[str, str]) -> dict[str, str]:
    """Checksums that cover the whole object: a composite one depends on the part sizes."""
    if sums.get("ChecksumType") == "COMPOSITE":
        return {}
    return {k: v for k, v in sums.items() if k in CHECKSUM_FIELDS and "-" not in v}


def _by_checksum(primary: Location, dr: Location, p: ObjectInfo, d: ObjectInfo) -> Verdict:
    """Decide on equal sizes and ETags that differ because of multipart part sizes."""
    p_sums = _comparable(primary.store.checksums(primary.bucket, p.key))
    d_sums = _comparable(dr.store.checksums(dr.bucket, d.key))
    common = sorted(p_sums.keys() & d_sums.keys())
    if not common:
        return "unverified"
    return "match" if all(p_sums[k] == d_sums[k] for k in common) else "mismatch"


def _pair(p: ObjectInfo, d: ObjectInfo) -> dict[str, Any]:
    return {
        "key": p.key,
        "primary": {"size": p.size, "etag": p.etag},
        "dr": {"size": d.size, "etag": d.etag},
    }


def compare_objects(
    primary: Location,
    dr: Location,
    *,
    examples: int,
    pending_after: dt.datetime | None = None,
) -> DatasetDiff:
    """Stream both listings and compare them key by key.

    An object matches when the sizes are equal and the ETags are, or, when an
    ETag is multipart-style (``-N``) and they differ, when a full-object checksum
    both copies carry is equal; without one it is ``unverified``. A primary object
    modified after ``pending_after`` that DR lacks or holds differently is
    ``pending`` rather than missing or mismatched.
    """
    diff = DatasetDiff(
        primary=str(primary), dr=str(dr), examples=examples, pending_after=pending_after
    )
    listings = (
        primary.store.objects(primary.bucket, primary.prefix, gauge=diff.primary_gauge),
        dr.store.objects(dr.bucket, dr.prefix, gauge=diff.dr_gauge),
    )
    try:
        _merge(diff, primary, dr, _ordered(listings[0], primary), _ordered(listings[1], dr))
    finally:
        for listing in listings:
            listing.close()
    log.debug(
        "compared %s with %s: %s (buffers held at most %d and %d entries)",
        primary,
        dr,
        diff.counts(),
        diff.primary_gauge.high_water,
        diff.dr_gauge.high_water,
    )
    return diff


def _merge(
    diff: DatasetDiff,
    primary: Location,
    dr: Location,
    p_iter: Iterator[ObjectInfo],
    d_iter: Iterator[ObjectInfo],
) -> None:
    p, d = next(p_iter, None), next(d_iter, None)
    while p is not None or d is not None:
        if d is None or (p is not None and p.key < d.key):
            assert p is not None
            example = {"key": p.key, "size": p.size, "last_modified": _when(p.last_modified)}
            if _in_flight(diff, p):
                diff.pending.add({**example, "reason": "missing"})
            else:
                diff.missing.add(example)
            _primary_seen(diff, p, replicated=False)
            p = next(p_iter, None)
        elif p is None or d.key < p.key:
            diff.extra.add({"key": d.key, "size": d.size})
            _dr_seen(diff, d)
            d = next(d_iter, None)
        else:
            _primary_seen(diff, p, replicated=_judge(diff, primary, dr, p, d))
            _dr_seen(diff, d)
            p, d = next(p_iter, None), next(d_iter, None)


def _primary_seen(diff: DatasetDiff, p: ObjectInfo, *, replicated: bool) -> None:
    diff.primary_objects += 1
    newest = diff.newest_primary
    if newest is None or p.last_modified > newest.last_modified:
        diff.newest_primary, diff.newest_primary_at_dr = p, replicated
    oldest = diff.oldest_unreplicated
    if not replicated and (oldest is None or p.last_modified < oldest.last_modified):
        diff.oldest_unreplicated = p


def _in_flight(diff: DatasetDiff, p: ObjectInfo) -> bool:
    return diff.pending_after is not None and p.last_modified > diff.pending_after


def _dr_seen(diff: DatasetDiff, d: ObjectInfo) -> None:
    diff.dr_objects += 1
    newest = diff.newest_dr
    if newest is None or d.last_modified > newest.last_modified:
        diff.newest_dr = d


def _judge(
    diff: DatasetDiff, primary: Location, dr: Location, p: ObjectInfo, d: ObjectInfo
) -> bool:
    """Count one pair; True when DR holds the primary's content (as far as can be told)."""
    if p.size != d.size:
        verdict: Verdict = "mismatch"
        reason = "size"
    elif p.etag == d.etag:
        verdict, reason = "match", ""
    elif not (p.multipart_etag or d.multipart_etag):
        verdict, reason = "mismatch", "etag"
    else:
        verdict, reason = _by_checksum(primary, dr, p, d), "checksum"
    if verdict == "match":
        diff.matched += 1
    elif verdict == "unverified":
        diff.unverified.add({**_pair(p, d), "reason": "multipart ETags differ, no common checksum"})
    elif _in_flight(diff, p):
        diff.pending.add({**_pair(p, d), "reason": reason})
    else:
        diff.mismatched.add({**_pair(p, d), "reason": reason})
    return verdict != "mismatch"


@dataclass
class DeleteFindings:
    """Keys whose DR copy a delete has reached."""

    examples: int
    delete_marker_at_dr: Tally = field(init=False)  # live at the primary, deleted at DR
    delete_propagated: Tally = field(init=False)  # deleted at the primary, gone at DR too
    primary_keys: int = 0
    dr_keys: int = 0

    def __post_init__(self) -> None:
        self.delete_marker_at_dr = Tally(self.examples)
        self.delete_propagated = Tally(self.examples)


def compare_deletes(primary: Location, dr: Location, *, examples: int) -> DeleteFindings:
    """Merge both sites' version histories by key and find deletes that reached DR.

    A key live at the primary must not have a delete marker as its latest version at
    DR; a key deleted at the primary (latest version a delete marker, after holding
    data) must still be readable at DR: "add only, never delete".
    """
    found = DeleteFindings(examples)
    p_iter = _ordered(primary.store.key_histories(primary.bucket, primary.prefix), primary)
    d_iter = _ordered(dr.store.key_histories(dr.bucket, dr.prefix), dr)
    p: KeyHistory | None = next(p_iter, None)
    d: KeyHistory | None = next(d_iter, None)
    while p is not None or d is not None:
        if p is None or (d is not None and d.key < p.key):
            found.dr_keys += 1
            d = next(d_iter, None)
            continue
        at_dr = d if d is not None and d.key == p.key else None
        found.primary_keys += 1
        found.dr_keys += at_dr is not None
        if not p.deleted and at_dr is not None and at_dr.deleted:
            found.delete_marker_at_dr.add(
                {"key": p.key, "deleted_at_dr": _when(at_dr.latest_modified)}
            )
        elif p.deleted and p.object_versions and (at_dr is None or at_dr.deleted):
            found.delete_propagated.add(
                {
                    "key": p.key,
                    "deleted_at_primary": _when(p.latest_modified),
                    "dr": "no version" if at_dr is None else "delete marker",
                }
            )
        p = next(p_iter, None)
        if at_dr is not None:
            d = next(d_iter, None)
    return found
