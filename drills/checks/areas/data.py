"""Data readiness: every dataset of the plan is at DR, fresh enough, and safe from deletes.

Datasets are not tied to workload tiers: the DR site serves what its buckets hold,
so a dataset problem fails and blocks a drill. ``data.replicated`` and
``data.rpo`` need the same streaming comparison of both copies; it runs once per
dataset and run (keyed on the run's ``Targets``) and both checks read it.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from drills.checks.areas.data_inventory import inventory_diff
from drills.checks.areas.identity import one_bucket
from drills.checks.base import EXAMPLES, CheckContext, Outcome, Status, check
from drills.plan import Dataset, DatasetKind
from drills.targets.objects import (
    DatasetDiff,
    DeleteFindings,
    Location,
    ObjectInfo,
    compare_deletes,
    compare_objects,
)
from drills.targets.sites import Targets, store_kind
from drills.timefmt import duration

log = logging.getLogger("drills.checks.data")

T = TypeVar("T")

DATASETS_AT_ONCE = 3


def _locations(targets: Targets, ds: Dataset) -> tuple[Location, Location]:
    return (
        Location(targets.primary.objects_for(ds.store), ds.primary_bucket, ds.prefix),
        Location(targets.dr.objects_for(ds.store), ds.dr_bucket, ds.prefix),
    )


def _both_copies(targets: Targets, ds: Dataset) -> tuple[Any, ...]:
    """Which two copies ``ds`` compares: the same for every plan naming the same buckets."""
    return (
        (targets.primary.identity(store_kind(ds.store)), ds.primary_bucket, ds.prefix),
        (targets.dr.identity(store_kind(ds.store)), ds.dr_bucket, ds.prefix),
    )


def dataset_diff(targets: Targets, ds: Dataset) -> DatasetDiff:
    """The comparison of both copies of ``ds``, made once per run and shared by checks
    (and by plans whose readiness runs together over the same buckets)."""
    # Two plans over the same buckets compare them alike only with the same inventory.
    inventory = ds.inventory.model_dump_json() if ds.inventory is not None else None
    key = ("dataset_diff", *_both_copies(targets, ds), ds.rpo_target, inventory)

    def compare() -> DatasetDiff:
        now = dt.datetime.now(dt.UTC)
        pending_after = now - dt.timedelta(seconds=ds.rpo_target)
        if ds.inventory is not None:
            return inventory_diff(
                targets, ds, examples=EXAMPLES, now=now, pending_after=pending_after
            )
        return compare_objects(
            *_locations(targets, ds), examples=EXAMPLES, pending_after=pending_after
        )

    return targets.once(key, compare)


def dataset_deletes(targets: Targets, ds: Dataset) -> DeleteFindings:
    """The version listings of both copies of ``ds`` compared for deletes, once per run
    (and once for every plan over the same buckets)."""
    key = ("dataset_deletes", *_both_copies(targets, ds))
    return targets.once(key, lambda: compare_deletes(*_locations(targets, ds), examples=EXAMPLES))


def for_each_dataset(
    datasets: Iterable[Dataset], work: Callable[[Dataset], T]
) -> list[tuple[Dataset, T]]:
    """``work`` on every dataset, a few at a time; the first error propagates."""
    chosen = list(datasets)
    if not chosen:
        return []
    with ThreadPoolExecutor(min(DATASETS_AT_ONCE, len(chosen)), "data") as pool:
        futures = [(ds, pool.submit(work, ds)) for ds in chosen]
        return [(ds, future.result()) for ds, future in futures]


def _age(now: dt.datetime, when: dt.datetime) -> float:
    return max(0.0, (now - when).total_seconds())


def _when(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat(timespec="seconds")


def _object(info: ObjectInfo | None, now: dt.datetime) -> dict[str, Any] | None:
    if info is None:
        return None
    return {
        "key": info.key,
        "last_modified": _when(info.last_modified),
        "age_s": round(_age(now, info.last_modified), 1),
    }


def _span(seconds: float) -> str:
    """A duration for a summary line: "5 h 35 min"."""
    return duration(seconds)


def counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def joined(items: Iterable[str]) -> str:
    return ", ".join(items)


# -- data.replicated ----------------------------------------------------------------------


@check(
    "data.replicated",
    title="Datasets replicated to DR",
    category="Data",
    timeout_s=300,
    reads=(
        "Object listings (or, with inventory:, the newest S3 Inventory reports) of each "
        "dataset's prefix in the primary and DR buckets, through the S3 API of each site."
    ),
    blocks=(
        "An object at the primary is missing at DR (beyond the rpo_target window) or has "
        "another size or ETag there."
    ),
    warns=(
        "Multipart ETags differ with no common checksum to prove the pair equal, or an "
        "inventory report is older than its schedule."
    ),
    remediation=(
        "Repair replication for the dataset (the replication rule, its role, KMS grants) and "
        "re-copy the missing or different objects to DR."
    ),
)
def data_replicated(ctx: CheckContext) -> Outcome:
    """Every object under each dataset's prefix at the primary exists in the DR bucket
    with the same size and ETag (or, when an ETag is multipart-style and the two
    differ only by part sizes, the same full-object checksum).

    Both buckets are listed at once, by prefix shards in parallel, and compared as
    two key-ordered streams, so any bucket size fits in bounded memory. Missing and
    different objects are counted with the first examples of each. A missing or
    different object is data the DR site would not serve after a takeover, so it
    fails and blocks the drill. A primary object written within the dataset's
    `rpo_target` that DR lacks is counted as pending, not missing: replication takes
    time, and `data.rpo` judges the lag. Objects only at DR (extra) are reported and
    allowed: DR is add-only. Pairs whose multipart ETags differ and that carry no
    common checksum cannot be proven equal: they warn.

    A dataset with `inventory:` is compared from the newest S3 Inventory report of each
    bucket (CSV.gz or Parquet, joined by key in DuckDB) instead of a listing; the
    evidence gives each report's age, and a report older than its schedule (Daily,
    Weekly) warns. With `recent_layout`, the date partitions since the older report
    are listed too, so objects written after it are checked as well.
    """
    if refused := one_bucket(ctx):
        return refused
    plan, targets = ctx.plan, ctx.targets
    if not plan.datasets:
        return Outcome(Status.PASS, "No datasets in the plan: nothing to replicate.")
    diffs = for_each_dataset(plan.datasets, lambda ds: dataset_diff(targets, ds))
    rows = [{"name": ds.name, "primary": d.primary, "dr": d.dr, **d.counts()} for ds, d in diffs]
    for row, (_, diff) in zip(rows, diffs, strict=True):
        row["examples"] = diff.problem_examples()
        if diff.inventory is not None:
            row["inventory"] = diff.inventory
    stale = [(ds, d.inventory) for ds, d in diffs if d.inventory and d.inventory["stale"]]
    broken = [(ds, d) for ds, d in diffs if d.incomplete]
    unproven = [(ds, d) for ds, d in diffs if d.unverified.count and not d.incomplete]
    evidence = {
        "datasets": rows,
        "compared": len(diffs),
        "objects_primary": sum(d.primary_objects for _, d in diffs),
        "missing": sum(d.missing.count for _, d in diffs),
        "mismatched": sum(d.mismatched.count for _, d in diffs),
        "extra": sum(d.extra.count for _, d in diffs),
        "unverified": sum(d.unverified.count for _, d in diffs),
        "pending": sum(d.pending.count for _, d in diffs),
    }
    if broken:
        parts = [
            f"{ds.name} ({d.missing.count} missing, {d.mismatched.count} differ)"
            for ds, d in broken
        ]
        return Outcome(
            Status.FAIL,
            f"{len(broken)} of {len(diffs)} datasets incomplete at DR: {joined(parts)}",
            evidence,
            remediation=_replication_hint(broken),
            blocking=True,
        )
    if unproven:
        return Outcome(
            Status.WARN,
            f"{evidence['unverified']} objects in {joined(ds.name for ds, _ in unproven)} "
            "differ in multipart ETag and carry no common checksum",
            evidence,
            remediation="Upload with a full-object checksum (e.g. --checksum-algorithm "
            "CRC64NVME) so copies made with other part sizes can be compared.",
        )
    if stale:
        return _stale_inventory(stale, evidence)
    matched = sum(d.matched for _, d in diffs)
    notes = "".join(f"; {evidence[k]} {k}" for k in ("pending", "extra") if evidence[k])
    notes += "".join(
        f"; {ds.name} from inventory {_span(d.inventory['age_s'])} old"
        for ds, d in diffs
        if d.inventory
    )
    return Outcome(
        Status.PASS,
        f"{counted(len(diffs), 'dataset')} at DR: {matched} primary objects match{notes}",
        evidence,
    )


def _stale_inventory(stale: list[tuple[Dataset, Any]], evidence: dict[str, Any]) -> Outcome:
    parts = [f"{ds.name} {_span(facts['age_s'])} old ({facts['schedule']})" for ds, facts in stale]
    return Outcome(
        Status.WARN,
        f"Inventory reports older than their schedule: {joined(parts)}",
        evidence,
        remediation="S3 has not published a newer inventory report: check that the inventory "
        "configuration is enabled and its destination bucket policy lets S3 write the report.",
    )


def _replication_hint(broken: list[tuple[Dataset, DatasetDiff]]) -> str:
    ds, diff = broken[0]
    return (
        f"Copy what is missing or different, e.g. `aws s3 sync {diff.primary} {diff.dr}`, "
        "or start an S3 Batch Replication job for existing objects; then find why "
        f"replication of {ds.name} stopped (rule status, permissions, failed-operation metrics)."
    )


# -- data.rpo -----------------------------------------------------------------------------


@check(
    "data.rpo",
    title="Replication lag within RPO",
    category="Data",
    timeout_s=300,
    reads=(
        "Object listings of each dataset's prefix in the primary and DR buckets (S3 API at "
        "each site), with LastModified times."
    ),
    blocks=(
        "The age of the oldest primary object not readable at DR is over the dataset's rpo_target."
    ),
    warns="Never.",
    remediation=(
        "Find what holds replication back (a stopped or throttled replication rule, failed "
        "objects) and fix it until the lag is within rpo_target."
    ),
)
def data_rpo(ctx: CheckContext) -> Outcome:
    """The replication lag of each dataset, measured from what is readable at DR,
    is within the dataset's `rpo_target`.

    Lag is `now - LastModified` at the primary of the oldest primary object that is
    not yet readable at DR (missing there, or with a different size or ETag): every
    write since then would be lost by a takeover now. When DR holds every primary
    object the lag is 0. The evidence also gives the age of the newest primary
    object (and whether DR has it) and of the newest object readable at DR. A lag
    over target fails and blocks the drill: the takeover would lose more data than
    the plan allows.
    """
    if refused := one_bucket(ctx):
        return refused
    plan, targets, now = ctx.plan, ctx.targets, ctx.now
    if not plan.datasets:
        return Outcome(Status.PASS, "No datasets in the plan: no replication lag to measure.")
    diffs = for_each_dataset(plan.datasets, lambda ds: dataset_diff(targets, ds))
    rows: list[dict[str, Any]] = []
    late: list[tuple[Dataset, float]] = []
    for ds, diff in diffs:
        oldest = diff.oldest_unreplicated
        lag = _age(now, oldest.last_modified) if oldest else 0.0
        if lag > ds.rpo_target:
            late.append((ds, lag))
        newest = _object(diff.newest_primary, now)
        if newest is not None:
            newest["at_dr"] = diff.newest_primary_at_dr
        rows.append(
            {
                "name": ds.name,
                "rpo_target_s": ds.rpo_target,
                "lag_s": round(lag, 1),
                "within_target": lag <= ds.rpo_target,
                "unreplicated": diff.unreplicated,
                "oldest_unreplicated": _object(oldest, now),
                "newest_primary": newest,
                "newest_at_dr": _object(diff.newest_dr, now),
            }
        )
    evidence = {"datasets": rows, "now": _when(now)}
    if late:
        parts = [f"{ds.name} {_span(lag)} > {_span(ds.rpo_target)}" for ds, lag in late]
        return Outcome(
            Status.FAIL,
            f"Replication lag over RPO target: {joined(parts)}",
            evidence,
            remediation=f"Replication of {late[0][0].name} is behind: check the replication "
            "rule and its backlog (pending operations, failed replications), then copy the "
            "objects not yet at DR.",
            blocking=True,
        )
    worst = max(rows, key=lambda r: r["lag_s"])
    return Outcome(
        Status.PASS,
        f"{counted(len(rows), 'dataset')} within RPO; "
        f"largest lag {_span(worst['lag_s'])} ({worst['name']})",
        evidence,
    )


# -- data.checkpoint_fresh ----------------------------------------------------------------


@check(
    "data.checkpoint_fresh",
    title="Fresh checkpoint at DR",
    category="Data",
    timeout_s=120,
    reads=(
        "Object listings of each checkpoint dataset's prefix in the DR bucket (and the "
        "primary's, for comparison) through the S3 API."
    ),
    blocks=(
        "A checkpoint dataset has no checkpoint at DR, or its newest one there is older than "
        "its rpo_target."
    ),
    warns="Never.",
    remediation=(
        "Make sure training writes checkpoints at least once per rpo_target and that they "
        "replicate to DR; if the primary's newest is as old, restart the training, not the "
        "replication."
    ),
)
def data_checkpoint_fresh(ctx: CheckContext) -> Outcome:
    """For each dataset of kind `checkpoint`, the newest checkpoint object readable at
    DR is younger than the dataset's `rpo_target` (`now - LastModified <= rpo_target`).

    This is the training-side RPO: training resumed at DR restarts from that
    checkpoint, so everything computed since it was written is lost. A stale or
    absent checkpoint fails and blocks the drill. The newest checkpoint at the
    primary is shown too: when it is as old, training stopped, not replication.
    """
    if refused := one_bucket(ctx):
        return refused
    plan, targets, now = ctx.plan, ctx.targets, ctx.now
    chosen = [ds for ds in plan.datasets if ds.kind is DatasetKind.CHECKPOINT]
    if not chosen:
        return Outcome(Status.PASS, "No checkpoint datasets in the plan: not applicable.")
    rows, stale = [], []
    for ds, diff in for_each_dataset(chosen, lambda ds: dataset_diff(targets, ds)):
        newest = diff.newest_dr
        age = _age(now, newest.last_modified) if newest else None
        if age is None or age > ds.rpo_target:
            stale.append((ds, age))
        rows.append(
            {
                "name": ds.name,
                "dr": diff.dr,
                "rpo_target_s": ds.rpo_target,
                "newest_at_dr": _object(newest, now),
                "newest_at_primary": _object(diff.newest_primary, now),
                "fresh": age is not None and age <= ds.rpo_target,
            }
        )
    evidence = {"datasets": rows, "now": _when(now)}
    if stale:
        parts = [
            f"{ds.name} " + ("has none" if age is None else f"is {_span(age)} old")
            for ds, age in stale
        ]
        return Outcome(
            Status.FAIL,
            f"Newest checkpoint at DR over RPO target: {joined(parts)}",
            evidence,
            remediation="Training at DR would restart from a stale checkpoint of "
            f"{stale[0][0].name}: check the checkpoint replication or copy job, "
            "and copy the latest checkpoint now.",
            blocking=True,
        )
    return Outcome(Status.PASS, f"{counted(len(rows), 'checkpoint dataset')} fresh at DR", evidence)
