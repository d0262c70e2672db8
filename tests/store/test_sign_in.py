"""The sign-in lockout's memory in the history store: counted per name and per address,
across store handles (sessions, replicas, restarts), with a lock that doubles."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from drills.store import sign_in
from drills.store.history import HistoryStore

T = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def _at(seconds: float) -> dt.datetime:
    return T + dt.timedelta(seconds=seconds)


def test_the_lock_begins_after_the_free_failures_and_doubles(history: HistoryStore) -> None:
    mallory = sign_in.subjects("  Mallory ", "198.51.100.7")
    assert mallory == ["name:mallory", "address:198.51.100.7"]
    for n in range(1, sign_in.FREE_FAILURES + 1):
        assert sign_in.record_failure(history, mallory, _at(n)) == (n, 0.0)
        assert sign_in.wait_s(history, mallory, _at(n)) == 0.0
    # The next failure locks for a minute: the password is not even looked at meanwhile.
    assert sign_in.record_failure(history, mallory, _at(10)) == (5, 60.0)
    assert sign_in.wait_s(history, mallory, _at(10)) == 60.0
    assert sign_in.wait_s(history, mallory, _at(40)) == 30.0
    # Another handle on the same store (a new session, another replica, a restart) agrees.
    restarted = HistoryStore(history.url)
    try:
        assert sign_in.wait_s(restarted, ["name:mallory"], _at(40)) == 30.0
        assert sign_in.wait_s(restarted, ["address:198.51.100.7"], _at(40)) == 30.0
        assert sign_in.wait_s(restarted, ["name:erin"], _at(40)) == 0.0
    finally:
        restarted.close()
    # Each failure once the lock ended costs twice as long, up to the cap.
    assert sign_in.record_failure(history, mallory, _at(70)) == (6, 120.0)
    assert sign_in.record_failure(history, mallory, _at(200)) == (7, 240.0)
    waits = [sign_in.record_failure(history, mallory, _at(10_000 * k))[1] for k in range(1, 8)]
    assert waits == [480.0, 960.0, 1920.0, 3600.0, 3600.0, 3600.0, 3600.0]


def test_a_name_and_an_address_are_counted_apart(history: HistoryStore) -> None:
    """Guessing under many names from one address, or one name from many addresses."""
    for n in range(5):
        sign_in.record_failure(history, sign_in.subjects(f"user{n}", "203.0.113.9"), _at(n))
    assert sign_in.wait_s(history, sign_in.subjects("someone-new", "203.0.113.9"), _at(5)) > 0
    assert sign_in.wait_s(history, sign_in.subjects("someone-new", "203.0.113.10"), _at(5)) == 0
    for n in range(5):
        sign_in.record_failure(history, sign_in.subjects("zoe", f"192.0.2.{n}"), _at(n))
    assert sign_in.wait_s(history, sign_in.subjects("ZOE", "192.0.2.200"), _at(5)) > 0


def test_a_sign_in_or_a_quiet_day_starts_the_count_again(history: HistoryStore) -> None:
    bob = sign_in.subjects("bob", None)
    for n in range(4):
        sign_in.record_failure(history, bob, _at(n))
    sign_in.record_success(history, bob)
    assert sign_in.record_failure(history, bob, _at(10)) == (1, 0.0)
    for n in range(4):
        sign_in.record_failure(history, bob, _at(20 + n))
    assert sign_in.wait_s(history, bob, _at(30)) > 0
    later = T + sign_in.RESET_AFTER + dt.timedelta(hours=2)
    assert sign_in.record_failure(history, bob, later) == (1, 0.0)


@pytest.mark.parametrize("sessions", [8])
def test_failures_at_once_all_count(history: HistoryStore, sessions: int) -> None:
    """Sessions failing at the same moment: none of their failures is lost."""
    errors: list[BaseException] = []

    def fail() -> None:
        try:
            sign_in.record_failure(history, ["name:racer"], _at(1))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=fail) for _ in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert sign_in.record_failure(history, ["name:racer"], _at(2))[0] == sessions + 1
