"""One way to write a duration and a moment, for every view: CLI, reports, dashboard,
notifications, metrics.

- :func:`duration`: as many significant digits as the size deserves, units spelled the
  same everywhere: ``12 ms``, ``1.5 s``, ``37.2 s``, ``2 min 50 s``, ``3 h``, ``1 h 5 min``,
  ``2 d 3 h``. Never more than three significant digits in a float.
- :func:`moment`: a date and a 24-hour time with its zone, ``2026-03-01 14:05:09 UTC``;
  :func:`clock` the time of day alone, ``14:05:09 UTC``.
- :func:`offset`: a moment relative to T0, ``T0+1.5 s``, or ``0.8 s before T0``.
- :func:`ago`: how old something is, ``4 min ago``.

Times are UTC unless ``DRILLS_TIMEZONE`` names an IANA zone (``Europe/Berlin``); the zone
is always written, so a reader never has to guess. (Plan files keep their own compact
syntax, ``15m``; :func:`drills.plan.durations.format_duration` writes that, for messages
about what a plan says.)

This module imports nothing from drills, so any layer can use it.
"""

from __future__ import annotations

import datetime as dt
import os
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["NONE", "ago", "clock", "duration", "moment", "offset", "zone"]

NONE = "—"  # what a missing value reads as, in every view
ZONE_ENV = "DRILLS_TIMEZONE"
_MINUTE, _HOUR, _DAY = 60, 3600, 86400


def duration(seconds: float | None) -> str:
    """``seconds`` as a person reads a duration: ``1.5 s``, ``2 min 50 s``, ``3 h``."""
    if seconds is None:
        return NONE
    if seconds < 0:
        return "-" + duration(-seconds)
    if seconds < 0.0005:
        return "0 s"
    if seconds < 1:
        return f"{_digits(seconds * 1000)} ms"
    if round(seconds, 1) < _MINUTE:
        return f"{_digits(seconds)} s"
    if round(seconds) < _HOUR:
        return _two(round(seconds), _MINUTE, "min", "s")
    if round(seconds / _MINUTE) < 24 * 60:
        return _two(round(seconds / _MINUTE), 60, "h", "min")
    return _two(round(seconds / _HOUR), 24, "d", "h")


def _digits(value: float) -> str:
    """At most three significant digits, no trailing zeros: 1.5, 37.2, 757."""
    text = f"{value:.3g}"
    return f"{float(text):g}" if "e" in text else text


def _two(count: int, size: int, big: str, small: str) -> str:
    whole, rest = divmod(count, size)
    return f"{whole} {big} {rest} {small}" if rest else f"{whole} {big}"


@lru_cache(maxsize=8)
def _zone(name: str) -> dt.tzinfo:
    try:
        return ZoneInfo(name) if name else dt.UTC
    except (ZoneInfoNotFoundError, ValueError):
        return dt.UTC  # a zone that does not exist: UTC, and the zone shown says so


def zone() -> dt.tzinfo:
    """The zone times are shown in: ``DRILLS_TIMEZONE``, else UTC."""
    return _zone(os.environ.get(ZONE_ENV, "").strip())


def _local(value: dt.datetime | str) -> dt.datetime:
    when = dt.datetime.fromisoformat(value) if isinstance(value, str) else value
    if when.tzinfo is None:  # the store keeps UTC; a naive value is UTC
        when = when.replace(tzinfo=dt.UTC)
    return when.astimezone(zone())


def moment(value: dt.datetime | str | None) -> str:
    """A moment (or ISO text, as reports hold it) as ``2026-03-01 14:05:09 UTC``."""
    if not value:
        return NONE
    local = _local(value)
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname() or 'UTC'}"


def clock(value: dt.datetime | str | None) -> str:
    """The time of day of a moment, with its zone: ``14:05:09 UTC``."""
    if not value:
        return NONE
    local = _local(value)
    return f"{local:%H:%M:%S} {local.tzname() or 'UTC'}"


def offset(seconds: float) -> str:
    """A moment relative to T0: ``T0+1.5 s``, ``T0`` itself, or ``0.8 s before T0``."""
    if seconds < 0 and duration(-seconds) != "0 s":
        return f"{duration(-seconds)} before T0"
    written = duration(max(seconds, 0.0))
    return "T0" if written == "0 s" else f"T0+{written}"


def ago(then: dt.datetime, at: dt.datetime | None = None) -> str:
    """How old a moment is, in words read at a glance: ``just now``, ``4 min ago``."""
    delta = ((at or dt.datetime.now(dt.UTC)) - then).total_seconds()
    if delta < 45:
        return "just now"
    if delta < _HOUR:
        return f"{max(1, round(delta / _MINUTE))} min ago"
    if delta < 48 * _HOUR:
        return f"{round(delta / _HOUR)} h ago"
    return f"{round(delta / _DAY)} days ago"
