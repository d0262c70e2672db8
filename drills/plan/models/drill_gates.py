"""The plan's gates: alerts that must not be firing, and windows (change freezes) when a
drill or a practice must not start. They never stop an incident."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from drills.plan.durations import PositiveDuration
from drills.plan.models.base import PlanModel
from drills.plan.refs import SecretRef
from drills.plan.rules import raise_rules
from drills.plan.types import CronExpr, HttpUrl, ShortText, TimeZone

# One Alertmanager matcher, as its API's `filter` takes it: label, operator, quoted value.
MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')


def _matchers(value: str) -> str:
    """``alertname="DiskFull", severity=~"critical|page"``: every matcher must parse."""
    text = value.strip().removeprefix("{").removesuffix("}")
    if not text.strip():
        raise ValueError('names no matcher; write e.g. alertname="DiskFull"')
    for part in split_matchers(text):
        if not MATCHER.fullmatch(part):
            raise ValueError(
                f'{part.strip()!r} is not a matcher such as alertname="DiskFull" or '
                'severity=~"critical|page"'
            )
    return value


def split_matchers(text: str) -> list[str]:
    """The matchers of a selector, split on the commas outside quoted values."""
    parts, current, quoted, escaped = [], "", False, False
    for char in text.strip().removeprefix("{").removesuffix("}"):
        if char == "," and not quoted:
            parts.append(current)
            current = ""
            continue
        current += char
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
    return [p for p in [*parts, current] if p.strip()]


AlertSelector = Annotated[str, Field(max_length=1000), AfterValidator(_matchers)]


def _unquote(value: str) -> str:
    """A matcher's value as Alertmanager reads it: ``\\"``, ``\\\\`` and ``\\n`` unescaped."""
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def parsed_matchers(selector: str) -> list[tuple[str, str, str]]:
    """``(label, operator, value)`` of each matcher of a valid selector."""
    found = []
    for part in split_matchers(selector):
        match = MATCHER.fullmatch(part)
        if match is None:  # a selector validated by the plan always parses
            raise ValueError(f"{part.strip()!r} is not a matcher")
        found.append((match.group(1), match.group(2), _unquote(match.group(3))))
    return found


def selector_matches(selector: str, labels: Mapping[str, str]) -> bool:
    """Whether an alert with ``labels`` matches every matcher of ``selector``, as
    Alertmanager matches: a missing label is the empty string, a regex is anchored."""
    for name, op, value in parsed_matchers(selector):
        have = str(labels.get(name, ""))
        hit = re.fullmatch(value, have) is not None if op in ("=~", "!~") else have == value
        if hit != (op in ("=", "=~")):
            return False
    return True


def _regexes_compile(value: str) -> str:
    for name, op, pattern in parsed_matchers(value):
        if op in ("=~", "!~"):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"the regular expression of {name} does not compile: {exc}"
                ) from None
    return value


# The selectors drills itself evaluates (declare_on): their regexes must compile here.
DeclareSelector = Annotated[AlertSelector, AfterValidator(_regexes_compile)]


class Alertmanager(PlanModel):
    url: HttpUrl
    """Alertmanager's base URL; its API v2 is read at the start of a run."""
    token: SecretRef | None = None
    """A bearer token, by reference, when Alertmanager sits behind a proxy that asks one."""


class BlockedWindow(PlanModel):
    """A change freeze: from each fire of ``cron`` for ``duration``, or on whole ``dates``."""

    name: ShortText
    """Named in the refusal."""
    cron: CronExpr | None = None
    """When the window opens, each time."""
    duration: PositiveDuration | None = None
    """How long it stays open after each opening."""
    dates: tuple[dt.date, ...] = ()
    """Whole days (in ``timezone``) that are blocked."""
    timezone: TimeZone = "UTC"
    """The IANA time zone the cron expression and the dates are read in."""

    @model_validator(mode="after")
    def _one_kind(self) -> BlockedWindow:
        rules = []
        if (self.cron is None) != (self.duration is None):
            rules.append((("duration",), "a cron window needs both cron and duration"))
        if self.cron is None and not self.dates:
            rules.append((("dates",), "a window needs a cron and a duration, or dates"))
        raise_rules("window", rules)
        return self


class Gates(PlanModel):
    alertmanager: Alertmanager | None = None
    """Where the blocking alerts are read."""
    blocking_alerts: Annotated[tuple[AlertSelector, ...], Field(max_length=50)] = ()
    """Alertmanager selectors (``alertname="DiskFull", severity="critical"``): an active,
    unsilenced alert matching one refuses a drill or practice."""
    blocked_windows: Annotated[tuple[BlockedWindow, ...], Field(max_length=50)] = ()
    """Change freezes: a drill or practice inside one is refused; a scheduled one skipped."""

    @model_validator(mode="after")
    def _where_alerts_are(self) -> Gates:
        if self.blocking_alerts and self.alertmanager is None:
            raise_rules(
                "gates", [(("alertmanager",), "blocking_alerts need an alertmanager to read")]
            )
        return self


__all__ = [
    "Alertmanager",
    "BlockedWindow",
    "DeclareSelector",
    "Gates",
    "parsed_matchers",
    "selector_matches",
    "split_matchers",
]
