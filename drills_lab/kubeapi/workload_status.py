"""Deployment and StatefulSet status, computed from their pods as the real controllers do.

The Progressing condition and its deadline follow the deployment
controller's ``syncRolloutStatus``: a finished rollout stays finished on a
mere scale, and only an unfinished one can exceed its progress deadline.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from drills_lab.kubeapi.objects import clone, dig, now_rfc3339, parse_rfc3339
from drills_lab.kubeapi.pods import is_ready, label

AVAILABLE, PROGRESSING = "Available", "Progressing"
NEW_RS_CREATED = "NewReplicaSetCreated"
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
RS_UPDATED = "ReplicaSetUpdated"
TIMED_OUT = "ProgressDeadlineExceeded"


def _resolve(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, int):
        return value
    text = str(value or "0")
    if text.endswith("%") and text[:-1].isdigit():
        scaled = total * int(text[:-1]) / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    return int(text) if text.isdigit() else 0


def max_unavailable(d: dict[str, Any], desired: int) -> int:
    if dig(d, "spec", "strategy", "type") != "RollingUpdate":
        return 0
    rolling = dig(d, "spec", "strategy", "rollingUpdate") or {}
    surge = _resolve(rolling.get("maxSurge", "25%"), desired, True)
    unavailable = _resolve(rolling.get("maxUnavailable", "25%"), desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1  # the API forbids both zero; the controller treats it so
    return min(unavailable, desired)


def _find(conditions: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def _set(
    conditions: list[dict[str, Any]],
    kind: str,
    ok: bool,
    reason: str,
    message: str,
    *,
    force: bool = False,
) -> None:
    """SetDeploymentCondition: same status and reason is a no-op unless forced."""
    status = "True" if ok else "False"
    old = _find(conditions, kind)
    if (
        old is not None
        and not force
        and old.get("status") == status
        and old.get("reason") == reason
    ):
        return
    now = now_rfc3339()
    new = {
        "type": kind,
        "status": status,
        "lastUpdateTime": now,
        "lastTransitionTime": old["lastTransitionTime"]
        if old is not None and old.get("status") == status and "lastTransitionTime" in old
        else now,
        "reason": reason,
        "message": message,
    }
    conditions[:] = [c for c in conditions if c.get("type") != kind] + [new]


def _progressed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    def n(status: dict[str, Any], key: str) -> int:
        return int(status.get(key) or 0)

    old_stale = n(old, "replicas") - n(old, "updatedReplicas")
    new_stale = n(new, "replicas") - n(new, "updatedReplicas")
    return (
        n(new, "updatedReplicas") > n(old, "updatedReplicas")
        or new_stale < old_stale
        or n(new, "readyReplicas") > n(old, "readyReplicas")
        or n(new, "availableReplicas") > n(old, "availableReplicas")
    )


def deployment(
    d: dict[str, Any], current: list[dict[str, Any]], old: list[dict[str, Any]], rs_name: str
) -> dict[str, Any]:
    desired = int(dig(d, "spec", "replicas") or 0)
    previous = d.get("status") or {}
    ready = sum(1 for p in current + old if is_ready(p))
    counts = {
        "replicas": len(current) + len(old),
        "updatedReplicas": len(current),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "unavailableReplicas": max(desired - ready, 0),
    }
    # Zero counts are omitted, as the real API's omitempty fields are.
    status: dict[str, Any] = {"observedGeneration": d["metadata"].get("generation", 1)}
    status |= {k: v for k, v in counts.items() if v}
    conditions = clone(previous.get("conditions") or [])

    if ready >= desired - max_unavailable(d, desired):
        _set(
            conditions,
            AVAILABLE,
            True,
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    else:
        _set(
            conditions,
            AVAILABLE,
            False,
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )

    progressing = _find(conditions, PROGRESSING)
    if progressing is None or f'"{rs_name}"' not in progressing.get("message", ""):
        # A new template means a new ReplicaSet, and a new rollout to follow.
        _set(
            conditions,
            PROGRESSING,
            True,
            NEW_RS_CREATED,
            f'Created new replica set "{rs_name}"',
            force=True,
        )
        progressing = _find(conditions, PROGRESSING)
    assert progressing is not None
    finished = (
        counts["replicas"] == counts["updatedReplicas"]
        and progressing.get("reason") == NEW_RS_AVAILABLE
    )
    if dig(d, "spec", "progressDeadlineSeconds") is not None and not finished:
        left = _seconds_left(d, progressing)
        if counts["updatedReplicas"] == desired == counts["replicas"] and ready == desired:
            _set(
                conditions,
                PROGRESSING,
                True,
                NEW_RS_AVAILABLE,
                f'ReplicaSet "{rs_name}" has successfully progressed.',
            )
        elif _progressed(previous, counts):
            _set(
                conditions,
                PROGRESSING,
                True,
                RS_UPDATED,
                f'ReplicaSet "{rs_name}" is progressing.',
                force=True,
            )
        elif left is not None and left <= 0:
            _set(
                conditions,
                PROGRESSING,
                False,
                TIMED_OUT,
                f'ReplicaSet "{rs_name}" has timed out progressing.',
            )
    status["conditions"] = conditions
    return status


def _seconds_left(d: dict[str, Any], progressing: dict[str, Any]) -> float | None:
    """Seconds until an unfinished rollout exceeds its deadline; None when it cannot."""
    deadline = dig(d, "spec", "progressDeadlineSeconds")
    if not isinstance(deadline, int) or progressing.get("reason") in (NEW_RS_AVAILABLE, TIMED_OUT):
        return None
    since = parse_rfc3339(progressing.get("lastUpdateTime"))
    if since is None:
        return None
    # Like the real controller, this reads the condition's time at second
    # precision, so a deadline may pass up to a second early.
    return (since + dt.timedelta(seconds=deadline) - dt.datetime.now(dt.UTC)).total_seconds()


def progress_deadline(d: dict[str, Any], status: dict[str, Any]) -> float | None:
    """Seconds from now when the rollout described by ``status`` must be looked at again."""
    progressing = _find(status.get("conditions") or [], PROGRESSING)
    if progressing is None:
        return None
    left = _seconds_left(d, progressing)
    return None if left is None else max(left, 0.0)


def statefulset(s: dict[str, Any], pods: list[dict[str, Any]], revision: str) -> dict[str, Any]:
    desired = int(dig(s, "spec", "replicas") or 0)
    previous = s.get("status") or {}
    ready = sum(1 for p in pods if is_ready(p))
    updated = sum(1 for p in pods if label(p, "controller-revision-hash") == revision)
    current_revision = previous.get("currentRevision") or revision
    if updated == desired and ready == desired:
        current_revision = revision  # the rolling update is complete
    current = sum(1 for p in pods if label(p, "controller-revision-hash") == current_revision)
    status: dict[str, Any] = {
        "observedGeneration": s["metadata"].get("generation", 1),
        "replicas": len(pods),
        "availableReplicas": ready,
        "currentRevision": current_revision,
        "updateRevision": revision,
        "collisionCount": 0,
    }
    status |= {
        k: v
        for k, v in (
            ("readyReplicas", ready),
            ("currentReplicas", current),
            ("updatedReplicas", updated),
        )
        if v
    }
    return status
