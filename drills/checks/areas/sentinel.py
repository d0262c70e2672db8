"""Readiness check of category "Cluster": is the DR sentinel alive and succeeding?

An idle DR pool drifts silently. A small real workload kept running at DR
exercises the chain (image pull, scheduling, GPUs, data) every day; this check
reads whether it is Ready and when it last succeeded.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from drills.checks.base import CheckContext, Outcome, Status, check
from drills.timefmt import duration


def _parse(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


@check(
    "cluster.sentinel",
    title="DR sentinel",
    category="Cluster",
    reads="The plan's sentinel workload at DR: its Ready replicas and its success annotation.",
    blocks="Never: the takeover may still work without it.",
    warns=(
        "Fails without blocking when the sentinel is missing at DR, has no Ready replica, or "
        "its last success is older than max_age."
    ),
    remediation=(
        "Deploy or repair the sentinel at DR and check that it writes its success annotation."
    ),
)
def cluster_sentinel(ctx: CheckContext) -> Outcome:
    """When the plan names a ``sentinel``, that small real workload runs at DR: it has at
    least one Ready replica, and the time of its last success (an RFC 3339 timestamp the
    sentinel writes into its ``success_annotation``, ``drills.dev/last-success`` by default)
    is within ``max_age``.

    A missing, unready or stale sentinel fails without blocking: the takeover may still
    work, but the daily proof that DR does is gone. Without a sentinel in the plan the
    check passes and says so.
    """
    sentinel = ctx.plan.sentinel
    if sentinel is None:
        return Outcome(Status.PASS, "the plan names no sentinel", {"sentinel": None})
    obj = ctx.targets.dr.kube.workload(sentinel.namespace, sentinel.kind.value, sentinel.name)
    evidence: dict[str, Any] = {"sentinel": sentinel.key, "exists": obj is not None}
    remediation = (
        f"Look at the sentinel {sentinel.key} at DR (`kubectl describe`, its logs): "
        "what stops it stops a takeover too."
    )
    if obj is None:
        return Outcome(Status.FAIL, f"sentinel {sentinel.key} missing at DR", evidence,
                       remediation=f"Deploy the sentinel {sentinel.key} at DR.")  # fmt: skip
    ready = int((obj.get("status") or {}).get("readyReplicas") or 0)
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    last = _parse(annotations.get(sentinel.success_annotation))
    age = (ctx.now - last).total_seconds() if last else None
    evidence |= {"ready": ready, "last_success": last.isoformat() if last else None,
                 "age_s": round(age, 1) if age is not None else None,
                 "max_age_s": sentinel.max_age}  # fmt: skip
    problems = []
    if ready < 1:
        problems.append("no Ready replica")
    if age is None:
        problems.append(f"no last success recorded in {sentinel.success_annotation}")
    elif age > sentinel.max_age:
        problems.append(f"last success {duration(age)} ago (max {duration(sentinel.max_age)})")
    if problems:
        return Outcome(Status.FAIL, f"sentinel {sentinel.key}: " + "; ".join(problems),
                       evidence, remediation=remediation)  # fmt: skip
    return Outcome(
        Status.PASS,
        f"sentinel {sentinel.key} Ready ({ready}), last success {duration(age or 0)} ago",
        evidence,
    )
