"""cron.cadence measures from the current day in a long-running process, not the first."""

from __future__ import annotations

import datetime as dt
import types

import pytest

from drills.plan import cron

LEAP_DAY = "0 3 29 2 *"  # fires once in four years: how often depends on where one starts


def test_explicit_starts_differ() -> None:
    assert cron.cadence(LEAP_DAY, dt.date(2025, 3, 1)).longest is None  # one leap day ahead
    assert cron.cadence(LEAP_DAY, dt.date(2027, 3, 1)).longest == dt.timedelta(days=1461)


def test_the_default_start_follows_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    today = [dt.datetime(2025, 3, 1, tzinfo=dt.UTC)]

    class Clock(dt.datetime):
        @classmethod
        def now(cls, tz: dt.tzinfo | None = None) -> Clock:
            return cls.fromtimestamp(today[0].timestamp(), tz)

    fake_dt = types.SimpleNamespace(**{k: getattr(dt, k) for k in dir(dt) if not k.startswith("_")})
    fake_dt.datetime = Clock
    monkeypatch.setattr(cron, "dt", fake_dt)
    assert cron.cadence(LEAP_DAY).longest is None
    today[0] = dt.datetime(2027, 3, 1, tzinfo=dt.UTC)  # two years on, same process
    assert cron.cadence(LEAP_DAY).longest == dt.timedelta(days=1461)
