"""A dataset's comparison made from its S3 Inventory reports instead of a full listing.

The newest complete report of each bucket is fetched into a scratch directory and
joined there (:mod:`drills.targets.inventory_compare`). A report is a snapshot taken
when S3 began scanning: objects written since are in neither report. When the plan
gives the dataset's date layout (``recent_layout``), the partitions of every day
from the older report's scan to today are listed on both sides and replace the
reports' rows for those keys, so new objects are checked as well. Without it the
evidence says from when on objects are not covered.
"""

from __future__ import annotations

import datetime as dt
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from drills.plan import Dataset, DatasetInventory
from drills.plan.models import InventoryDestination
from drills.targets.inventory import Manifest, fetch_files, latest_manifest, report_root
from drills.targets.inventory_compare import InventorySide, compare_inventories
from drills.targets.objects import DatasetDiff, ObjectInfo, ObjectStore
from drills.targets.sites import Targets

log = logging.getLogger("drills.checks.data")


def recent_partitions(
    inv: DatasetInventory, prefix: str, since: dt.datetime, now: dt.datetime
) -> list[str]:
    """The dataset's daily partitions from the day of ``since`` to today, oldest first."""
    if inv.recent_layout is None:
        return []
    day, last = since.astimezone(dt.UTC).date(), now.astimezone(dt.UTC).date()
    found = []
    while day <= last:
        found.append(prefix + day.strftime(inv.recent_layout))
        day += dt.timedelta(days=1)
    return found


def _listed(store: ObjectStore, bucket: str, partitions: list[str]) -> list[ObjectInfo]:
    return [info for part in partitions for info in store.objects(bucket, part)]


def _report(
    store: ObjectStore, inv: DatasetInventory, dest: InventoryDestination, source_bucket: str
) -> Manifest:
    root = report_root(dest.prefix, source_bucket, inv.config_for(dest))
    return latest_manifest(store, dest.bucket, root, source_bucket)


def _facts(
    inv: DatasetInventory, reports: dict[str, Manifest], partitions: list[str], now: dt.datetime
) -> dict[str, Any]:
    oldest = min(m.created for m in reports.values())
    age = max(0.0, (now - oldest).total_seconds())
    return {
        "schedule": inv.schedule.value,
        "age_s": round(age, 1),
        "stale": age > inv.schedule.seconds,
        "reports": {
            side: {
                "manifest": m.where,
                "created": m.created.isoformat(timespec="seconds"),
                "format": m.file_format,
                "files": len(m.files),
            }
            for side, m in reports.items()
        },
        "recent_listed": partitions,
        # Without a date layout, what was written after the older scan began is unseen.
        "not_covered_after": None if partitions else oldest.isoformat(timespec="seconds"),
    }


def inventory_diff(
    targets: Targets, ds: Dataset, *, examples: int, now: dt.datetime, pending_after: dt.datetime
) -> DatasetDiff:
    """The dataset's diff from both sides' newest inventory reports (``ds.inventory``)."""
    inv = ds.inventory
    assert inv is not None
    stores = {
        "primary": targets.primary.objects_for(ds.store),
        "dr": targets.dr.objects_for(ds.store),
    }
    buckets = {"primary": ds.primary_bucket, "dr": ds.dr_bucket}
    dests = {"primary": inv.primary, "dr": inv.dr}
    reports = {side: _report(stores[side], inv, dests[side], buckets[side]) for side in stores}
    since = min(m.created for m in reports.values())
    partitions = recent_partitions(inv, ds.prefix, since, now)
    with tempfile.TemporaryDirectory(prefix="drills-inventory-") as tmp:
        scratch = Path(tmp)
        started = time.perf_counter()
        sides = {
            side: InventorySide(
                where=f"s3://{buckets[side]}/{ds.prefix}",
                target=stores[side].target,
                manifest=reports[side],
                paths=fetch_files(stores[side], reports[side], scratch / side),
                prefix=ds.prefix,
                recent=_listed(stores[side], buckets[side], partitions),
            )
            for side in stores
        }
        fetched = time.perf_counter()
        diff = compare_inventories(
            sides["primary"], sides["dr"], examples=examples, scratch=scratch,
            pending_after=pending_after, recent_prefixes=partitions,
        )  # fmt: skip
        log.info(
            "%s: inventory reports fetched in %.1f s, joined in %.1f s",
            ds.name, fetched - started, time.perf_counter() - fetched,
        )  # fmt: skip
    diff.inventory = _facts(inv, reports, partitions, now)
    return diff
