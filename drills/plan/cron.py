"""Drill schedules: five-field cron expressions, read the way Prefect's scheduler reads them.

A drill fences the primary every time its schedule fires, so a schedule is
checked for what it *does*, not only for its syntax: ``* * * * *`` is valid
cron and a disaster; ``0 3 31 2 *`` is valid cron and never runs. Fire times
are computed exactly, day by day, over the next six years (a leap day included).

Day-of-month and day-of-week combine as in the croniter that Prefect uses
(``day_or=True``): when both are restricted a day matches either; when one is
unrestricted (``*``, or its whole range while the other field has a ``*``), the
other decides.
"""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass
from functools import lru_cache

MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
# (field name, lowest, highest, names for values starting at `lowest`)
FIELDS: tuple[tuple[str, int, int, list[str]], ...] = (
    ("minute", 0, 59, []),
    ("hour", 0, 23, []),
    ("day-of-month", 1, 31, []),
    ("month", 1, 12, MONTHS),
    ("day-of-week", 0, 7, DAYS),
)
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
HORIZON_DAYS = 6 * 366  # every 4-year leap cycle, with room: a Feb 29 schedule fires in it
_FULL = {2: 31, 4: 7}
_LONGEST_MONTH = dict(
    zip(range(1, 13), (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31), strict=True)
)  # how many values make day-of-month / day-of-week unrestricted


def small_int(text: str) -> int | None:
    """``int(text)`` for up to six ASCII digits, else None (no unicode digits, no huge numbers)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 6 else None


def normalise(value: str) -> str:
    """The expression with single spaces, or ValueError naming what is wrong with it."""
    text = " ".join(value.split())
    if text.lower() in MACROS:
        return text
    fields = text.split(" ")
    if len(fields) != 5:
        raise ValueError(
            f"cron must have 5 fields (minute hour day-of-month month day-of-week), "
            f"got {len(fields)}"
        )
    for part, spec in zip(fields, FIELDS, strict=True):
        _expand(part, spec)
    return text


def _expand(part: str, spec: tuple[str, int, int, list[str]]) -> frozenset[int]:
    name, low, high, names = spec
    values: set[int] = set()
    for item in part.split(","):
        values |= _expand_item(item, name, low, high, names)
    if name == "day-of-week" and 7 in values:
        values = (values - {7}) | {0}  # 7 is Sunday too
    return frozenset(values)


def _expand_item(item: str, name: str, low: int, high: int, names: list[str]) -> set[int]:
    where = f"cron {name} field"
    body, slash, step_text = item.partition("/")
    step = small_int(step_text) if slash else 1
    if step is None or not 1 <= step <= high - low + 1:
        raise ValueError(
            f"{where}: step {_quoted(step_text)} must be a number from 1 to {high - low + 1}"
        )
    if body == "*":
        return set(range(low, high + 1, step))
    first, dash, last = body.partition("-")
    start = _value(first, where, low, high, names)
    end = _value(last, where, low, high, names) if dash else (high if slash else start)
    if end < start:
        raise ValueError(f"{where}: range {_quoted(body)} runs backwards")
    return set(range(start, end + 1, step))


def _value(text: str, where: str, low: int, high: int, names: list[str]) -> int:
    if text.lower() in names:
        return names.index(text.lower()) + low
    number = small_int(text)
    if number is None:
        hint = f" or a name ({names[0]}–{names[-1]})" if names else ""
        raise ValueError(f"{where}: {_quoted(text)} is not a number from {low} to {high}{hint}")
    if not low <= number <= high:
        raise ValueError(f"{where}: {number} is out of range {low}–{high}")
    return number


def _quoted(text: str) -> str:
    # Cron fields are short; a long one is not echoed (it could be anything pasted).
    return repr(text) if len(text) <= 20 and text.isprintable() else "a value that is not shown"


@dataclass(frozen=True)
class CronSpec:
    """The values each field allows, and how day-of-month and day-of-week combine."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 is Sunday
    either_day: bool  # both day fields restricted: a day matching either fires

    @property
    def date_possible(self) -> bool:
        """Whether some month allowed has some day-of-month allowed (not so for Feb 30)."""
        return any(day <= _LONGEST_MONTH[month] for month in self.months for day in self.days)

    def fires_on(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        if self.either_day and not self.date_possible:
            # croniter looks for the next day-of-month match and the next weekday match
            # and takes the sooner; with no possible date it raises instead, so Prefect
            # never runs the schedule at all.
            return False
        by_date = day.day in self.days
        by_weekday = day.isoweekday() % 7 in self.weekdays
        return by_date or by_weekday if self.either_day else by_date and by_weekday

    @property
    def times(self) -> list[int]:
        """Minutes after midnight at which it fires, on a day that fires."""
        return sorted(h * 60 + m for h in self.hours for m in self.minutes)


def parse(value: str) -> CronSpec:
    text = normalise(value)
    text = MACROS.get(text.lower(), text)
    fields = text.split(" ")
    minutes, hours, days, months, weekdays = (
        _expand(part, spec) for part, spec in zip(fields, FIELDS, strict=True)
    )
    either = not (_any_day(fields, 2) or _any_day(fields, 4))
    return CronSpec(minutes, hours, days, months, weekdays, either_day=either)


def _any_day(fields: list[str], index: int) -> bool:
    # croniter's rule: `*`, or the whole range while the other day field has a `*` in it.
    other = fields[6 - index]
    full = len(_expand(fields[index], FIELDS[index])) == _FULL[index]
    return fields[index] == "*" or (full and "*" in other)


@dataclass(frozen=True)
class Cadence:
    """How often a schedule fires, over the horizon; None where it never fires twice."""

    fires: bool
    shortest: dt.timedelta | None
    longest: dt.timedelta | None


def cadence(value: str, start: dt.date | None = None) -> Cadence:
    """The shortest and longest time between two fires from ``start`` (default today).

    Cached by the day it starts from, resolved here: a process that runs for months
    (the exporter, the dashboard) measures from the current day, not the first one."""
    return _cadence(value, start or dt.datetime.now(dt.UTC).date())


@lru_cache(maxsize=256)
def _cadence(value: str, first: dt.date) -> Cadence:
    spec = parse(value)
    days = [
        day
        for day in (first + dt.timedelta(days=n) for n in range(HORIZON_DAYS))
        if spec.fires_on(day)
    ]
    times = spec.times
    if not days:
        return Cadence(False, None, None)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    gaps += [(b - a).days * 1440 - times[-1] + times[0] for a, b in itertools.pairwise(days)]
    if not gaps:
        return Cadence(True, None, None)
    return Cadence(True, dt.timedelta(minutes=min(gaps)), dt.timedelta(minutes=max(gaps)))


def next_fire_times(
    value: str, after: dt.datetime, count: int, *, within_days: int = HORIZON_DAYS
) -> list[dt.datetime]:
    """The next ``count`` fire times strictly after ``after`` (wall-clock, as given), on
    the ``within_days`` days from its date on (a calendar of weeks need not look a year on)."""
    spec = parse(value)
    found: list[dt.datetime] = []
    day = after.date()
    for _ in range(min(within_days, HORIZON_DAYS)):
        if spec.fires_on(day):
            for minute in spec.times:
                moment = dt.datetime.combine(day, dt.time(minute // 60, minute % 60), after.tzinfo)
                if moment > after:
                    found.append(moment)
                    if len(found) == count:
                        return found
        day += dt.timedelta(days=1)
    return found
