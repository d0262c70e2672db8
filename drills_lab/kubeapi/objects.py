"""Small helpers over API objects as plain JSON dicts."""

from __future__ import annotations

import datetime as dt
from typing import Any


def clone(value: Any) -> Any:
    """Copy a JSON value; several times faster than ``copy.deepcopy`` on API objects."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def meta(obj: dict[str, Any]) -> dict[str, Any]:
    """The object's metadata, created if missing."""
    m = obj.get("metadata")
    if not isinstance(m, dict):
        m = obj["metadata"] = {}
    return m


def annotation(obj: dict[str, Any], key: str) -> str | None:
    value = (obj.get("metadata", {}).get("annotations") or {}).get(key)
    return value if isinstance(value, str) else None


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in obj.get("status", {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == kind:
            return c
    return None


def dig(obj: Any, *path: str) -> Any:
    for part in path:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj
