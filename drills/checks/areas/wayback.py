"""Readiness for the way back: may production return from DR to the primary?

The failback direction asks the plan's own checks of the reversed plan
(drills.plan.reverse), where the primary plays DR: its cluster, nodes and GPU
capacity, its registry, its secrets, the DNS control, and the replication lag of
each dataset from DR to the primary. Two questions have no forward twin, and live
here, in a registry of their own so that the forward readiness never runs them:

- ``data.caught_up``: every object at DR is readable at the primary (RPO 0, the
  gate of a planned move back), with a short wait for copies in flight;
- ``fence.writers_stopped``: the primary's writers are still stopped, so nothing
  writes at both sites while DR serves.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import time
from collections.abc import Iterable
from typing import Any

from drills.checks.base import (
    EXAMPLES,
    CheckContext,
    CheckRegistry,
    CheckResult,
    Outcome,
    Status,
)
from drills.plan import Dataset, Workload
from drills.store.details import DatasetCopiedBack
from drills.targets.kube import KubeTarget
from drills.targets.objects import Location, ObjectStore, compare_objects
from drills.targets.sites import Targets
from drills.timefmt import duration

WAYBACK = CheckRegistry()

# The plan's checks that, asked of the reversed plan, ask about the way back.
SWAPPED = (
    "cluster.reachable",
    "cluster.nodes_ready",
    "cluster.gpu_capacity",
    "images.synced",
    "data.rpo",
    "secrets.synced",
    "secrets.rotation",
    "dns.control",
)
# What each is called in the failback direction: the forward titles name DR.
TITLES = {
    "cluster.reachable": "Both clusters reachable",
    "cluster.nodes_ready": "Primary nodes ready",
    "cluster.gpu_capacity": "GPU capacity at the primary",
    "images.synced": "Every image in the primary registry",
    "data.rpo": "Reverse replication lag within RPO",
    "secrets.synced": "Secrets present at the primary",
    "secrets.rotation": "Secrets within their rotation limit",
    "dns.control": "DNS control works",
}
# The forward checks' words for the two sites, and what each means on the way back, where
# "DR" is the site production goes home to. One pass, so a word is never swapped twice.
_SITE_WORDS = {
    "the primary's": "DR's",
    "The primary's": "DR's",
    "the primary": "DR",
    "The primary": "DR",
    "primary": "DR",
    "Primary": "DR",
    "at DR": "at the primary",
    "DR's": "the primary's",
    "DR": "the primary",
}
_SITE_WORD = re.compile(r"\b(" + "|".join(re.escape(w) for w in _SITE_WORDS) + r")\b")


def homeward(text: str) -> str:
    """A forward check's summary said of the reversed plan, with each site named for what it
    is on the way back: "are at DR with the primary's digest" becomes "are at the primary
    with DR's digest"."""
    return _SITE_WORD.sub(lambda m: _SITE_WORDS[m.group(1)], text)


def homeward_result(result: CheckResult) -> CheckResult:
    """A result of one of the :data:`SWAPPED` checks, titled and worded for the way back."""
    remediation = homeward(result.remediation) if result.remediation else result.remediation
    return dataclasses.replace(
        result,
        title=TITLES[result.id],
        summary=homeward(result.summary),
        remediation=remediation,
    )


# How long the gate waits for copies in flight to land before it calls them missing.
CATCH_UP_WAIT_S = 10.0
CATCH_UP_POLL_S = 0.5


def reverse_sync(
    reversed_targets: Targets, ds: Dataset, *, since: dt.datetime | None, now: dt.datetime
) -> DatasetCopiedBack:
    """What DR holds of ``ds`` and how much of it the primary can read, asked of the
    reversed plan's targets and dataset (its "primary" side is DR)."""
    at_dr = Location(reversed_targets.primary.objects_for(ds.store), ds.primary_bucket, ds.prefix)
    at_primary = Location(reversed_targets.dr.objects_for(ds.store), ds.dr_bucket, ds.prefix)
    diff = compare_objects(at_dr, at_primary, examples=EXAMPLES)
    written, size = _written_since(at_dr.store, ds, since)
    oldest = diff.oldest_unreplicated
    lag = max(0.0, (now - oldest.last_modified).total_seconds()) if oldest else 0.0
    return DatasetCopiedBack(
        name=ds.name,
        dr_objects=diff.primary_objects,
        written_at_dr=written,
        bytes_written_at_dr=size,
        missing_at_primary=diff.unreplicated,
        lag_seconds=round(lag, 1),
    )


def _written_since(store: ObjectStore, ds: Dataset, since: dt.datetime | None) -> tuple[int, int]:
    if since is None:
        return 0, 0
    # S3 gives LastModified in whole seconds: an object written in T0's own second is
    # listed as older than T0, so the second T0 falls in counts whole.
    since = since.replace(microsecond=0)
    count = size = 0
    listing = store.objects(ds.primary_bucket, ds.prefix)
    try:
        for info in listing:
            if info.last_modified >= since:
                count, size = count + 1, size + info.size
    finally:
        listing.close()
    return count, size


def behind(rows: Iterable[DatasetCopiedBack]) -> list[DatasetCopiedBack]:
    return [row for row in rows if row.missing_at_primary]


def describe_behind(rows: Iterable[DatasetCopiedBack]) -> str:
    """ "checkpoints (1 object, 12 s behind)": the datasets the primary cannot yet read."""
    return ", ".join(
        f"{r.name} ({r.missing_at_primary} object{'' if r.missing_at_primary == 1 else 's'}, "
        f"{duration(r.lag_seconds)} behind)"
        for r in rows
    )


def _caught_up_rows(ctx: CheckContext, since: dt.datetime | None) -> list[DatasetCopiedBack]:
    deadline = time.monotonic() + CATCH_UP_WAIT_S
    while True:
        now = dt.datetime.now(dt.UTC)
        rows = [reverse_sync(ctx.targets, ds, since=since, now=now) for ds in ctx.plan.datasets]
        if not behind(rows) or time.monotonic() >= deadline:
            return rows
        time.sleep(CATCH_UP_POLL_S)


@WAYBACK.check(
    "data.caught_up",
    title="DR writes readable at the primary",
    category="Data",
    reads=(
        "Object listings of each dataset's prefix in the DR bucket and in the primary bucket "
        "(S3 API), asked of the reversed plan; the history store for the incident's start."
    ),
    blocks=(
        "An object written at DR is still not readable at the primary (same size and ETag) "
        "after a short grace."
    ),
    warns="Never.",
    remediation=(
        "Repair reverse replication (DR to primary) and wait until it catches up before "
        "failing back."
    ),
)
def data_caught_up(ctx: CheckContext) -> Outcome:
    """Every object under each dataset's prefix at DR is readable at the primary (same
    size and ETag): reverse replication has caught up, and a move back loses nothing.

    Asked of the reversed plan. Copies in flight get a few seconds to land; whatever
    the primary still cannot read then fails and blocks the failback, per dataset
    with its lag (the age of the oldest DR object the primary lacks) against the
    dataset's `rpo_target`. The evidence also counts the objects DR wrote since the
    incident's T0, when a history store tells which incident holds the plan.
    """
    if not ctx.plan.datasets:
        return Outcome(Status.PASS, "No datasets in the plan: nothing to copy back.")
    rows = _caught_up_rows(ctx, _incident_t0(ctx))
    evidence: dict[str, Any] = {
        "datasets": [
            row.model_dump(mode="json")
            | {"rpo_target_s": ds.rpo_target, "within_target": row.lag_seconds <= ds.rpo_target}
            for row, ds in zip(rows, ctx.plan.datasets, strict=True)
        ]
    }
    late = behind(rows)
    if late:
        return Outcome(
            Status.FAIL,
            f"DR writes not yet readable at the primary: {describe_behind(late)}",
            evidence,
            remediation=f"Reverse replication of {late[0].name} (DR → primary) is behind or "
            "off: check the bidirectional replication rule, or copy the objects DR holds "
            "to the primary, then check again.",
            blocking=True,
        )
    written = sum(r.written_at_dr for r in rows)
    return Outcome(
        Status.PASS,
        f"{len(rows)} dataset(s): every DR object readable at the primary "
        f"({written} written at DR since T0)",
        evidence,
    )


def _incident_t0(ctx: CheckContext) -> dt.datetime | None:
    if ctx.history is None:
        return None
    from drills.store.serving import recorded_serving

    return recorded_serving(ctx.history, ctx.plan.name).incident_t0


def running_writers(kube: KubeTarget, writers: Iterable[Workload]) -> dict[str, dict[str, int]]:
    """Writers with replicas asked for or pods still there: ``{key: {replicas, pods}}``."""
    found = {}
    for w in writers:
        obj = kube.workload(w.namespace, str(w.kind), w.name) or {}
        replicas = int(obj.get("spec", {}).get("replicas") or 0)
        labels = obj.get("spec", {}).get("selector", {}).get("matchLabels", {})
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        pods = len(kube.pods(w.namespace, selector)) if selector else 0
        if replicas or pods:
            found[w.key] = {"replicas": replicas, "pods": pods}
    return found


@WAYBACK.check(
    "fence.writers_stopped",
    title="Primary writers still fenced",
    category="Cluster",
    timeout_s=30,
    reads=(
        "The plan's writer workloads in the primary cluster (replicas and pods), asked of the"
        " reversed plan."
    ),
    blocks="A writer runs at the primary while DR serves.",
    warns="Never.",
    remediation=(
        "Scale the named writers at the primary to zero (and find what restarted them) before"
        " failing back."
    ),
)
def writers_stopped(ctx: CheckContext) -> Outcome:
    """The plan's writers at the primary are still stopped (no replicas, no pods) while
    DR serves: two sites writing the same data cannot be merged back.

    Asked of the reversed plan, where the primary is the site taking over. A writer
    running at the primary fails and blocks the failback.
    """
    writers = ctx.plan.writers
    running = running_writers(ctx.targets.dr.kube, writers)
    evidence = {"writers": [w.key for w in writers], "running": running}
    if running:
        return Outcome(
            Status.FAIL,
            f"{len(running)} writer(s) running at the primary: {', '.join(running)}",
            evidence,
            remediation="Scale them to 0 at the primary: DR takes the writes until the failback "
            "stops them there.",
            blocking=True,
        )
    return Outcome(Status.PASS, f"{len(writers)} writer(s) stopped at the primary", evidence)


__all__ = [
    "SWAPPED",
    "TITLES",
    "WAYBACK",
    "behind",
    "describe_behind",
    "reverse_sync",
    "running_writers",
]
