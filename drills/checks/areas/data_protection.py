"""Data readiness: the DR copy of each dataset survives a bad delete at the primary
(versioning, lifecycle rules, and the deletes that reached it)."""

from __future__ import annotations

from typing import Any

from drills.checks.areas.data import counted, dataset_deletes, for_each_dataset, joined
from drills.checks.base import EXAMPLES, CheckContext, Outcome, Status, check
from drills.plan import Dataset
from drills.targets.objects import LifecycleRule
from drills.targets.sites import Targets

# How long a non-current version must survive, when a rule does not keep enough of
# them by count: a bad delete or overwrite has to be noticed and undone before the
# last good version expires, and silent corruption can take weeks to surface.
NONCURRENT_FLOOR_DAYS = 30

# -- data.delete_protection ---------------------------------------------------------------

VIOLATIONS = (
    "versioning_not_enabled",
    "lifecycle_expires_current",
    "lifecycle_expires_noncurrent",
    "delete_marker_at_dr",
    "delete_propagated",
)


def rule_problems(rule: LifecycleRule, ds: Dataset) -> list[tuple[str, dict[str, Any]]]:
    """What a lifecycle rule of the DR bucket may remove that the plan needs kept."""
    if not rule.covers(ds.prefix):
        return []
    example = {"bucket": ds.dr_bucket, "rule": rule.id, "rule_prefix": rule.prefix}
    found: list[tuple[str, dict[str, Any]]] = []
    if rule.expires_current:
        found.append(("lifecycle_expires_current", example))
    if rule.noncurrent_days is not None:
        kept = (rule.newer_noncurrent_versions or 0) + 1
        if kept < ds.min_versions and rule.noncurrent_days < NONCURRENT_FLOOR_DAYS:
            found.append(
                (
                    "lifecycle_expires_noncurrent",
                    {
                        **example,
                        "noncurrent_days": rule.noncurrent_days,
                        "newer_noncurrent_versions": rule.newer_noncurrent_versions,
                        "min_versions": ds.min_versions,
                    },
                )
            )
    return found


def _protection(targets: Targets, ds: Dataset) -> dict[str, Any]:
    dr = targets.dr.objects_for(ds.store)
    problems: dict[str, list[dict[str, Any]]] = {kind: [] for kind in VIOLATIONS}
    status = dr.versioning(ds.dr_bucket)
    if status != "Enabled":
        problems["versioning_not_enabled"].append({"bucket": ds.dr_bucket, "status": status})
    rules = dr.lifecycle_rules(ds.dr_bucket)
    for rule in rules:
        for kind, example in rule_problems(rule, ds):
            problems[kind].append(example)
    deletes = dataset_deletes(targets, ds)
    counts = {kind: len(found) for kind, found in problems.items()}
    counts["delete_marker_at_dr"] = deletes.delete_marker_at_dr.count
    counts["delete_propagated"] = deletes.delete_propagated.count
    problems["delete_marker_at_dr"] = deletes.delete_marker_at_dr.examples
    problems["delete_propagated"] = deletes.delete_propagated.examples
    return {
        "name": ds.name,
        "dr_bucket": ds.dr_bucket,
        "versioning": status,
        "lifecycle_rules": len(rules),
        "min_versions": ds.min_versions,
        "keys_primary": deletes.primary_keys,
        "keys_dr": deletes.dr_keys,
        "violations": counts,
        "examples": {kind: found[:EXAMPLES] for kind, found in problems.items() if found},
    }


_PROTECTION_HINTS = {
    "versioning_not_enabled": "enable versioning on the DR bucket "
    "(`aws s3api put-bucket-versioning --versioning-configuration Status=Enabled`)",
    "lifecycle_expires_current": "remove the Expiration of current versions from the DR "
    "bucket's lifecycle rule",
    "lifecycle_expires_noncurrent": f"keep NewerNoncurrentVersions >= min_versions - 1, or "
    f"NoncurrentDays >= {NONCURRENT_FLOOR_DAYS}",
    "delete_marker_at_dr": "restore the objects at DR by deleting the delete markers "
    "(their data is still a non-current version)",
    "delete_propagated": "restore from DR's non-current versions and stop replicating "
    "deletes (DeleteMarkerReplication Disabled)",
}


@check(
    "data.delete_protection",
    title="DR copies protected from deletes",
    category="Data",
    timeout_s=120,
    reads=(
        "Each DR bucket's versioning and lifecycle configuration, and the object versions and"
        " delete markers of each dataset's prefix at both sites (S3 API)."
    ),
    blocks=(
        "Versioning is not Enabled at DR, a lifecycle rule expires current or too recent "
        "non-current versions, or a delete at the primary reached the DR copy."
    ),
    warns="Never.",
    remediation=(
        "Enable versioning on the DR bucket, make lifecycle rules keep min_versions or 30 "
        "days of non-current versions, and restore deleted DR objects from their previous "
        "versions."
    ),
)
def data_delete_protection(ctx: CheckContext) -> Outcome:
    """The DR copy of each dataset survives a bad delete at the primary ("add only,
    never delete").

    - The DR bucket has versioning `Enabled`.
    - No enabled lifecycle rule covering the prefix expires current versions, and
      none expires non-current versions too soon: a rule must keep at least
      `min_versions` versions of a key (`NewerNoncurrentVersions >= min_versions - 1`)
      or keep every non-current version for at least 30 days (`NoncurrentDays`).
    - No object live at the primary has a delete marker as its latest version at DR.
    - No object deleted at the primary (a delete marker as latest, after data) is
      gone at DR (a delete marker there too, or no version at all).

    Any violation fails and blocks the drill: a DR copy that deletes can reach is
    not the clean copy a takeover needs.
    """
    plan, targets = ctx.plan, ctx.targets
    if not plan.datasets:
        return Outcome(Status.PASS, "No datasets in the plan: nothing to protect.")
    rows = [row for _, row in for_each_dataset(plan.datasets, lambda ds: _protection(targets, ds))]
    totals = {kind: sum(r["violations"][kind] for r in rows) for kind in VIOLATIONS}
    evidence = {"datasets": rows, "violations": totals}
    found = [kind for kind in VIOLATIONS if totals[kind]]
    if not found:
        return Outcome(
            Status.PASS,
            f"{counted(len(rows), 'DR bucket')} versioned, retained and untouched by deletes",
            evidence,
        )
    where = [r["name"] for r in rows if any(r["violations"].values())]
    what = ", ".join(f"{totals[k]} {k.replace('_', ' ')}" for k in found)
    return Outcome(
        Status.FAIL,
        f"DR copies not protected from deletes in {joined(where)}: {what}",
        evidence,
        remediation="; ".join(_PROTECTION_HINTS[k] for k in found) + ".",
        blocking=True,
    )
