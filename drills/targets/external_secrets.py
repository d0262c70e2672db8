"""External Secrets Operator's ``ExternalSecret`` (external-secrets.io/v1beta1): where its
target Secret is, and whether its sync is healthy.

Nothing here reads a secret value: the target Secret is read by the callers that
fingerprint it. An ExternalSecret's status holds what the operator recorded: its ``Ready``
condition (with the error of a failing sync), ``refreshTime`` (the last successful sync)
and, in the spec, ``refreshInterval`` and the store it reads (``secretStoreRef``).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

PATH = "/apis/external-secrets.io/v1beta1/namespaces/{namespace}/externalsecrets/{name}"
# ESO's own default when spec.refreshInterval is not set.
DEFAULT_REFRESH = "1h"
# A sync may run late by this much beyond one interval (requeue jitter, a busy operator)
# before its Secret counts as stale: a refreshTime older than two intervals missed one.
MISSED_REFRESHES = 2

_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration(text: str) -> float | None:
    """Seconds of a Go duration (``1h30m``, ``15s``, ``0``); None when it is not one."""
    text = text.strip()
    if text == "0":
        return 0.0
    parts = _GO_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def target_name(obj: dict[str, Any]) -> str:
    """The Secret the ExternalSecret writes: ``spec.target.name``, else its own name."""
    target = ((obj.get("spec") or {}).get("target") or {}).get("name")
    return str(target or (obj.get("metadata") or {}).get("name", ""))


def store_ref(obj: dict[str, Any]) -> str:
    """The store it reads, as ``Kind/name``."""
    ref = (obj.get("spec") or {}).get("secretStoreRef") or {}
    return f"{ref.get('kind') or 'SecretStore'}/{ref.get('name', '?')}"


@dataclass(frozen=True)
class SyncState:
    """What the operator says of one ExternalSecret's sync; nothing secret in it."""

    ready: str  # "True", "False", "Unknown", or "absent" when there is no condition
    reason: str
    message: str
    store: str
    refresh_interval_s: float | None
    refresh_time: dt.datetime | None

    def problem(self, now: dt.datetime) -> str | None:
        """Why the sync cannot be trusted now (not Ready, or stale), or None."""
        if self.ready != "True":
            why = f"{self.reason}: {self.message}" if self.reason else self.message
            state = "has no Ready condition" if self.ready == "absent" else "is not Ready"
            return f"{state} ({why or 'no message'}) reading {self.store}"
        if self.refresh_interval_s is None:
            return f"has a refreshInterval that is not a duration, reading {self.store}"
        if self.refresh_interval_s == 0:
            return None  # refreshes only when its spec changes: no schedule to fall behind
        if self.refresh_time is None:
            return f"has never synced (no status.refreshTime) from {self.store}"
        age = (now - self.refresh_time).total_seconds()
        limit = MISSED_REFRESHES * self.refresh_interval_s
        if age > limit:
            return (
                f"is stale: last synced {age:.0f}s ago from {self.store}, more than "
                f"{MISSED_REFRESHES} × its refreshInterval ({self.refresh_interval_s:g}s)"
            )
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "ready": self.ready,
            "reason": self.reason,
            "message": self.message,
            "store": self.store,
            "refresh_interval_s": self.refresh_interval_s,
            "refresh_time": self.refresh_time.isoformat() if self.refresh_time else None,
        }


def sync_state(obj: dict[str, Any]) -> SyncState:
    status = obj.get("status") or {}
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    interval = str((obj.get("spec") or {}).get("refreshInterval") or DEFAULT_REFRESH)
    refreshed = status.get("refreshTime")
    when: dt.datetime | None = None
    if refreshed:
        try:
            when = dt.datetime.fromisoformat(str(refreshed).replace("Z", "+00:00"))
        except ValueError:
            when = None
    if when is not None and when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return SyncState(
        ready=str(ready.get("status", "Unknown")) if ready else "absent",
        reason=str((ready or {}).get("reason") or ""),
        message=str((ready or {}).get("message") or ""),
        store=store_ref(obj),
        refresh_interval_s=go_duration(interval),
        refresh_time=when,
    )
