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

UNIT_SECONDS: dict[str, float] = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

# A century is far beyond any sensible drill setting, and keeps every value
# convertible to datetime.timedelta without overflow.
MAX_SECONDS = 100 * 365 * 86400.0

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_WHOLE = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+")
_HINT = "use seconds or a number with a unit, such as 45s, 15m, 1h30m or 2d"


def parse_duration(value: str | int | float) -> float:
    """Return ``value`` in seconds; raise ``ValueError`` (naming no secret) when it is not one."""
    if isinstance(value, bool):
        raise ValueError(f"a duration cannot be true/false; {_HINT}")
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # an int with hundreds of digits
            raise ValueError("duration is too long (at most 100 years)") from None
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        if len(text) > 40:
            raise ValueError(f"not a duration; {_HINT}")
        if re.fullmatch(r"\d+(?:\.\d+)?", text):
            seconds = float(text)
        elif _WHOLE.fullmatch(text):
            seconds = sum(float(n) * UNIT_SECONDS[u] for n, u in _PART.findall(text))
        else:
            raise ValueError(f"not a duration; {_HINT}")
    else:
        raise ValueError(f"a duration must be a number of seconds or a string; {_HINT}")
    if not math.isfinite(seconds) or seconds > MAX_SECONDS:
        raise ValueError("duration is too long (at most 100 years)")
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    return seconds


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


_SCHEMA = WithJsonSchema(
    {
        "anyOf": [
            {"type": "number", "minimum": 0},
            {"type": "string", "pattern": r"^\s*(\d+(\.\d+)?(ms|s|m|h|d)?)+\s*$"},
        ],
        "description": "Seconds, or a string with units: 45s, 15m, 1h30m, 2d.",
    }
)

Duration = Annotated[float, BeforeValidator(_validate), _SCHEMA]
"""A duration of zero or more seconds."""

PositiveDuration = Annotated[float, BeforeValidator(_validate_positive), _SCHEMA]
"""A duration longer than zero seconds."""
