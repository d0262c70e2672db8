"""Durations as a plan writes them ("45s", "15m", "1h30m", 90) and as code uses them (seconds).

Plans are written by people, so a duration may be a bare number of seconds or a
string with units; code always sees a finite float of seconds.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

UNIT_SECONDS: dict[str, float] = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_ORDER = list(UNIT_SECONDS)  # largest first: a duration names its units in this order

# A century is far beyond any sensible drill setting, and keeps every value
# convertible to datetime.timedelta without overflow.
MAX_SECONDS = 100 * 365 * 86400.0

# ASCII digits only: \d would take "١٥m" (Arabic-Indic digits) for 15m.
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
# Parts as written, spaces and units in any case and spelling, so that a wrong unit or a
# space can be named; only the exact form (no space inside) is accepted.
_PARTS = re.compile(r"(?:\s*[0-9]+(?:\.[0-9]+)?\s*[A-Za-z]{1,10})+\s*")
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]+)")
_HINT = "use seconds or a number with a unit, such as 45s, 15m, 1h30m or 2d"
_UNITS = "ms, s, m, h or d"
# Units people write that mean something else, or nothing here.
_NOT_UNITS = {
    "M": "did you mean {n}m (minute)? months are not a duration unit",
    "mo": "months are not a duration unit; use days, e.g. 30d",
    "w": "weeks are not a duration unit; use days, e.g. 7d",
    "y": "years are not a duration unit; use days, e.g. 365d",
    **dict.fromkeys(("min", "mins", "minute", "minutes"), "did you mean {n}m (minutes)?"),
    **dict.fromkeys(("sec", "secs", "second", "seconds"), "did you mean {n}s (seconds)?"),
    **dict.fromkeys(("hr", "hrs", "hour", "hours"), "did you mean {n}h (hours)?"),
    **dict.fromkeys(("day", "days"), "did you mean {n}d (days)?"),
}


def parse_duration(value: str | int | float) -> float:
    """Return ``value`` in seconds; raise ``ValueError`` (naming no secret) when it is not one.

    The grammar is strict, because a misread duration is silent: ASCII digits, units
    lowercase (``1M`` is not a minute, whatever it meant), each unit once, largest first,
    and no space inside (``15 m``, ``1h 30m``); spaces around it are YAML's, and ignored.
    """
    if isinstance(value, bool):
        raise ValueError(f"a duration cannot be true/false; {_HINT}")
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # an int with hundreds of digits
            raise ValueError("duration is too long (at most 100 years)") from None
    elif isinstance(value, str):
        seconds = _parse_text(value)
    else:
        raise ValueError(f"a duration must be a number of seconds or a string; {_HINT}")
    if not math.isfinite(seconds) or seconds > MAX_SECONDS:
        raise ValueError("duration is too long (at most 100 years)")
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    return seconds


def _parse_text(value: str) -> float:
    text = value.strip()
    if len(text) > 40:
        raise ValueError(f"not a duration; {_HINT}")
    if _NUMBER.fullmatch(text):
        return float(text)
    if not _PARTS.fullmatch(text):
        raise ValueError(f"not a duration; {_HINT}")
    parts = _PART.findall(text)
    seconds, last = 0.0, -1
    for number, unit in parts:
        rank = _unit_rank(number, unit)
        if rank == last:
            raise ValueError(f"unit {unit} appears twice; write each unit once, e.g. 1h30m")
        if rank < last:
            raise ValueError("units must go from the largest to the smallest, e.g. 1h30m")
        seconds += float(number) * UNIT_SECONDS[unit]
        last = rank
    if any(c.isspace() for c in text):
        # "15 m" may be a typo for 15m, or for 15 and a stray m: nothing is guessed.
        written = "".join(n + u for n, u in parts)
        raise ValueError(f"no spaces inside a duration: did you mean {written}?")
    return seconds


def _unit_rank(number: str, unit: str) -> int:
    if unit in UNIT_SECONDS:
        return _ORDER.index(unit)
    hint = _NOT_UNITS.get(unit) or _NOT_UNITS.get(unit.lower())
    if hint is None and unit.lower() in UNIT_SECONDS:
        hint = "units are lowercase: did you mean {n}" + unit.lower() + "?"
    if hint is None:
        hint = f"not a duration unit after {{n}}; use {_UNITS}"
    raise ValueError(hint.format(n=number))


def format_duration(seconds: float) -> str:
    """Render seconds the way a plan would write them: 900 -> "15m", 5400 -> "1h30m"."""
    if seconds < 1:
        return f"{seconds * 1000:g}ms" if seconds else "0s"
    parts: list[str] = []
    rest = seconds
    for unit in ("d", "h", "m"):
        size = UNIT_SECONDS[unit]
        whole = int(rest // size)
        if whole:
            parts.append(f"{whole}{unit}")
            rest -= whole * size
    if rest or not parts:
        parts.append(f"{rest:g}s")
    return "".join(parts)


def _validate(value: Any) -> float:
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise PydanticCustomError("plan_duration", "{message}", {"message": str(exc)}) from None


def _validate_positive(value: Any) -> float:
    seconds = _validate(value)
    if seconds <= 0:
        raise PydanticCustomError(
            "plan_duration", "{message}", {"message": "must be longer than zero"}
        )
    return seconds


_N = r"[0-9]+(\.[0-9]+)?"
_SCHEMA_PATTERN = rf"^(?=.*[0-9])\s*({_N}|({_N}d)?({_N}h)?({_N}m(?!s))?({_N}s)?({_N}ms)?)\s*$"
_SCHEMA = WithJsonSchema(
    {
        "anyOf": [
            {"type": "number", "minimum": 0},
            {"type": "string", "pattern": _SCHEMA_PATTERN},
        ],
        "description": "Seconds, or a string with units: 45s, 15m, 1h30m, 2d.",
    }
)

Duration = Annotated[float, BeforeValidator(_validate), _SCHEMA]
"""A duration of zero or more seconds."""

PositiveDuration = Annotated[float, BeforeValidator(_validate_positive), _SCHEMA]
"""A duration longer than zero seconds."""
