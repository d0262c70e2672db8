"""Readiness check of category "Data": can DR write to its buckets, with its own credentials?

Listing proves reads. A takeover writes (checkpoints, model outputs), and the faults
that stop writes (an IAM policy, a KMS key the DR role may not use, a bucket policy)
are invisible to every listing.
"""

from __future__ import annotations

import os
from typing import Any

from drills.checks.areas.identity import one_bucket
from drills.checks.base import EXAMPLES, CheckContext, Outcome, Status, check
from drills.errors import TargetError, unreadable
from drills.targets.sites import store_kind

# Outside every dataset's prefix (unless a dataset covers the whole bucket), and named
# so that anyone who finds one left over knows what wrote it and that it can go.
CANARY_PREFIX = "drills-dr-writable-canary/"


def canary_key(ctx: CheckContext) -> str:
    stamp = ctx.now.strftime("%Y%m%dT%H%M%SZ")
    return f"{CANARY_PREFIX}{ctx.plan.name}-{stamp}-{os.urandom(4).hex()}.txt"


def _probe(ctx: CheckContext, bucket: str, store_name: str | None) -> dict[str, Any]:
    """Write, read back byte for byte, and delete one canary; the delete runs whatever failed."""
    store = ctx.targets.dr.objects_for(store_name)
    key = canary_key(ctx)
    body = (f"drills readiness canary: DR write test for plan {ctx.plan.name}; "
            f"safe to delete. {os.urandom(16).hex()}\n").encode()  # fmt: skip
    row: dict[str, Any] = {"bucket": bucket, "key": key, "wrote": False, "read_back": False,
                           "removed": False}  # fmt: skip
    if store_name is not None:
        row["store"] = store_name
    version: str | None = None
    try:
        version = store.put_canary(bucket, key, body)
        row["wrote"] = True
        row["read_back"] = store.read(bucket, key, limit=len(body)) == body
        if not row["read_back"]:
            row["error"] = "read back other bytes than were written"
    except TargetError as exc:
        if unreadable(exc):  # no answer from the store: nothing to judge (the check errors)
            raise
        row["error"] = exc.cause
    finally:
        if row["wrote"]:
            try:
                store.remove_canary(bucket, key, version)
                row["removed"] = True
            except TargetError as exc:
                row["error"] = row.get("error") or f"could not delete the canary: {exc.cause}"
    return row


def _shared_probe(ctx: CheckContext, bucket: str, store: str | None) -> dict[str, Any]:
    """One canary per DR bucket and set of credentials in a run over many plans: the
    plans that reach the bucket alike share its answer (its key names the first)."""
    key = ("dr_writable", ctx.targets.dr.identity(store_kind(store)), bucket)
    return dict(ctx.targets.once(key, lambda: _probe(ctx, bucket, store)))


@check(
    "data.dr_writable",
    title="DR buckets writable",
    category="Data",
    timeout_s=60,
    reads=(
        "Each dataset's DR bucket (S3 API at the DR site, with the DR site's credentials): "
        "writes, reads back and deletes a canary object under drills-dr-writable-canary/."
    ),
    blocks=(
        "A DR bucket refuses the write, the read-back or the delete (IAM, KMS, bucket "
        "policy), or reads back other bytes. An unreachable store, or something else "
        "answering, is an error and blocks too."
    ),
    warns="Never.",
    remediation=(
        "Grant the DR site's credentials s3:PutObject, GetObject and DeleteObject (and "
        "DeleteObjectVersion in a versioned bucket) on the DR buckets, with use of their KMS "
        "key, then re-run the check."
    ),
)
def data_dr_writable(ctx: CheckContext) -> Outcome:
    """With the DR site's credentials, write a small canary object into each DR bucket, read
    it back byte for byte, and delete it (its version too, in a versioned bucket).

    This catches IAM, KMS and bucket-policy faults that listing never sees. The canary
    lives under ``drills-dr-writable-canary/`` and names the plan and the time; it is
    removed even when the read-back fails. A bucket DR cannot write fails and blocks:
    the takeover's workloads write there. A store that cannot be reached, or where
    something else answers (a proxy's 404), is an error: it refused nothing. Plans
    checked together (`--all`) that reach a bucket with the same credentials share one
    canary.
    """
    if refused := one_bucket(ctx):  # a canary "at DR" would be written at the primary
        return refused
    # A bucket by its store: the same name in two stores is two buckets.
    buckets = sorted({(d.store or "", d.dr_bucket) for d in ctx.plan.datasets})
    rows = [_shared_probe(ctx, bucket, store or None) for store, bucket in buckets]
    bad = [r for r in rows if not (r["wrote"] and r["read_back"] and r["removed"])]
    evidence = {"buckets": rows[:EXAMPLES], "failed": len(bad)}
    if not buckets:
        return Outcome(Status.PASS, "the plan has no datasets", evidence)
    if not bad:
        return Outcome(
            Status.PASS,
            f"wrote, read back and removed a canary in {len(rows)} DR bucket(s)",
            evidence,
        )
    first = bad[0]
    return Outcome(
        Status.FAIL,
        f"{len(bad)} DR bucket(s) not writable: {first['bucket']}: {first.get('error', '?')}",
        evidence,
        remediation="Give the DR credentials s3:PutObject, s3:GetObject and s3:DeleteObject "
        "(and kms:GenerateDataKey / kms:Decrypt on the bucket key) on the DR buckets, and check "
        "the bucket policy denies none of them.",
        blocking=True,
    )
