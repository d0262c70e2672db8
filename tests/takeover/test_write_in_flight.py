"""A write that timed out may still land: a stalled server keeps the queued request and
applies it when it resumes, after any read made in between. The journal keeps such a change
possibly applied, so that a rollback restores the original.

Found when an incident's DNS switch, sent to a stopped BIND, landed after the read that
settles a failed write had marked it failed: the rollback skipped it and left DNS at DR.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from drills.errors import RollbackIncompleteError, TemporaryError
from drills.store.history import HistoryStore
from drills.store.kinds import EntryState, Mode, RunStatus
from drills.store.models import DrillRun
from drills.takeover.journal import Journal
from drills.takeover.steps.changes import record_address
from drills.takeover.steps.executor import ChangeExecutor
from drills.takeover.timeline import utc_now
from drills.targets.dns import Rfc2136Target
from drills_lab.named import NamedServer
from tests.support.faultproxy import FaultProxy, UdpFaultProxy
from tests.support.services import bind_target

PRIMARY, DR = "127.0.0.2", "127.0.0.3"


@dataclass(frozen=True)
class DnsOnly:
    """The one part of a plan's targets that a ``dns.record`` change reads and writes."""

    dns: Rfc2136Target


def values(dns: Rfc2136Target, name: str) -> tuple[str, ...]:
    return dns.read(name, "A")[0].values


@pytest.fixture
def updates_held(named_server: NamedServer) -> Iterator[tuple[FaultProxy, Rfc2136Target]]:
    """The zone behind one ``host:port``: UDP queries pass at once, and TCP (which carries
    RFC 2136 updates) through a proxy that can hold them, as a stopped server would."""
    upstream = f"{named_server.host}:{named_server.port}"
    with FaultProxy(upstream) as tcp:
        port = int(tcp.address.rsplit(":", 1)[1])
        with UdpFaultProxy(upstream, port=port):
            # Long enough for a loaded machine's reads; the held update times out all the same.
            dns = bind_target(named_server, [tcp.address], timeout_s=2.0)
            name = f"api.{named_server.zone}"
            try:
                yield tcp, dns
            finally:
                tcp.pass_through()
                if values(dns, name) != (PRIMARY,):  # the session's server, as others expect it
                    dns.update(name, "A", PRIMARY, 30)


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    """The journal of one running drill, in a history store of its own."""
    history = HistoryStore(f"sqlite:///{tmp_path / 'history.db'}")
    run = DrillRun(id="in-flight", plan="lab", plan_digest="sha256:x", mode=Mode.DRILL,
                   operator="tests", status=RunStatus.RUNNING, started_at=utc_now())  # fmt: skip
    history.create_run(run)
    yield Journal(history, run.id)
    history.close()


def test_a_timed_out_switch_that_lands_later_is_undone_by_the_rollback(
    updates_held: tuple[FaultProxy, Rfc2136Target], named_server: NamedServer, journal: Journal
) -> None:
    proxy, dns = updates_held
    name = f"api.{named_server.zone}"
    executor = ChangeExecutor(cast(Any, DnsOnly(dns)), journal)
    address, switched = record_address(name, "A"), {"values": [DR], "ttl": 30}

    proxy.stall()  # the update waits, queued
    with pytest.raises(TemporaryError, match="timed out"):
        executor.apply("dns.record", address, switched)
    assert values(dns, name) == (PRIMARY,)  # a read now sees the original...
    proxy.pass_through()
    deadline = time.monotonic() + 10
    while values(dns, name) != (DR,):  # ...and then the queued update lands
        assert time.monotonic() < deadline, "the held update never reached the server"
        time.sleep(0.05)
    [change] = journal.changes()
    assert change.state == EntryState.PENDING  # possibly applied: never "failed, nothing to undo"

    # The retry finds the switch made, and the journal says so.
    assert executor.apply("dns.record", address, switched)["values"] == [DR]
    [change] = journal.changes()
    assert change.state == EntryState.APPLIED

    [undone] = executor.rollback()
    assert undone.seq == change.seq and values(dns, name) == (PRIMARY,)
    assert [c.state for c in journal.changes()] == [EntryState.UNDONE]


def serial_settled(dns: Rfc2136Target, name: str, after: int) -> None:
    """Until the zone's serial has moved past ``after`` and then stayed put for a second:
    the held updates have reached the server, whatever order the proxy released them in."""
    deadline, last, since = time.monotonic() + 10, after, time.monotonic()
    while True:
        serial = dns.read(name, "A")[0].serial or 0
        if serial != last:
            last, since = serial, time.monotonic()
        if last != after and time.monotonic() - since >= 1.0:
            return
        assert time.monotonic() < deadline, "the held updates never reached the server"
        time.sleep(0.05)


def test_a_switch_still_held_when_the_rollback_reads_is_undone_by_a_write(
    updates_held: tuple[FaultProxy, Rfc2136Target], named_server: NamedServer, journal: Journal
) -> None:
    """A server that resumes answers a read before it applies the update it queued: the
    rollback reads the original, and the switch lands after it. Found in a loaded run where
    an incident's rollback left DNS at DR (rollback-failed). The rollback must write the
    original back, never take the read for "nothing to undo"."""
    proxy, dns = updates_held
    name = f"api.{named_server.zone}"
    executor = ChangeExecutor(cast(Any, DnsOnly(dns)), journal)
    address, switched = record_address(name, "A"), {"values": [DR], "ttl": 30}
    before = dns.read(name, "A")[0].serial or 0

    proxy.stall()
    with pytest.raises(TemporaryError, match="timed out"):
        executor.apply("dns.record", address, switched)
    assert values(dns, name) == (PRIMARY,)  # the read the rollback makes sees the original
    # The restore is held behind the switch: the rollback cannot call the change undone yet.
    with pytest.raises(RollbackIncompleteError, match="timed out"):
        executor.rollback()
    [change] = journal.changes()
    assert change.state == EntryState.PENDING

    proxy.pass_through()
    serial_settled(dns, name, before)
    [undone] = executor.rollback()  # as `drills recover` would, once the server answers
    assert undone.seq == change.seq and values(dns, name) == (PRIMARY,)
    assert [c.state for c in journal.changes()] == [EntryState.UNDONE]
