"""The DNS record a drill switches: read it on every authoritative server, change it, confirm.

Two providers share one interface (:class:`DnsTarget`): RFC 2136 dynamic updates signed
with TSIG (BIND, PowerDNS, Knot, Infoblox; see ``rfc2136.py``) and Route 53
(``route53.py``). ``dns_for(plan)`` (``from_plan.py``) builds the one the plan names.

A switch is only done when *every* authoritative server answers the new value: a
client's resolver may ask any of them, so one stale server keeps some users on the
fenced primary for as long as it stays stale.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from drills.errors import TemporaryError
from drills.targets.retry import Waiting

log = logging.getLogger("drills.targets.dns")

DEFAULT_TIMEOUT_S = 3.0
POLL_INTERVAL_S = 0.5


@dataclass(frozen=True)
class RecordAnswer:
    """What one authoritative server answers for a name and type.

    ``values`` are normalised (see :func:`normalize_value`) and sorted; empty when the
    server has no such record. ``serial`` is the zone's SOA serial on that server
    (RFC 2136 only; Route 53 has none to show).
    """

    server: str
    values: tuple[str, ...]
    ttl: int | None
    serial: int | None = None

    @property
    def exists(self) -> bool:
        return bool(self.values)

    def to_json(self) -> dict[str, object]:
        return {
            "server": self.server,
            "values": list(self.values),
            "ttl": self.ttl,
            "serial": self.serial,
        }


@dataclass(frozen=True)
class ChangeResult:
    """A change the provider accepted; ``confirm`` tells when every server serves it."""

    target: str
    name: str
    rtype: str
    value: str
    ttl: int
    sent_to: str
    change_id: str | None = None  # Route 53's change id, to poll with get_change


class DnsTarget(ABC):
    """One zone at one DNS provider. Safe to share between threads."""

    target: str
    poll_interval_s: float = POLL_INTERVAL_S

    @abstractmethod
    def read(self, name: str, rtype: str) -> list[RecordAnswer]:
        """The record as every authoritative server answers it, one answer per server."""

    @abstractmethod
    def update(self, name: str, rtype: str, value: str, ttl: int) -> ChangeResult:
        """Replace the whole record set with ``value``; raises unless the provider accepted."""

    @abstractmethod
    def delete(self, name: str, rtype: str) -> None:
        """Remove the whole record set, if there is one; raises unless the provider accepted."""

    @abstractmethod
    def check_control(self, name: str, rtype: str) -> None:
        """Prove our credentials could change the record, without changing it.

        Raises PermanentError naming the cause when they could not.
        """

    @abstractmethod
    def _staleness(
        self, name: str, rtype: str, want: str, previous_serial: int | None
    ) -> tuple[list[RecordAnswer], dict[str, str]]:
        """One poll for ``confirm``: the answers, and why each stale server is stale."""

    def close(self) -> None:  # noqa: B027 - adapters without connections need nothing
        """Release connections; the RFC 2136 adapter holds none between queries."""

    def confirm(
        self,
        name: str,
        rtype: str,
        value: str,
        *,
        previous_serial: int | None = None,
        deadline_s: float = 60.0,
        on_wait: Callable[[Waiting], None] | None = None,
    ) -> list[RecordAnswer]:
        """Poll until every authoritative server answers exactly ``value``.

        For RFC 2136 each server's SOA serial must also have moved past
        ``previous_serial`` (when given); for Route 53 the change must be INSYNC.
        A server that does not answer is asked again until the deadline; each wait is
        told to ``on_wait``. Raises TemporaryError at the deadline, naming every server
        still stale and why.
        """
        want = normalize_value(rtype, value)
        started = time.monotonic()
        deadline = started + deadline_s
        polls = 0
        while True:
            answers, stale = self._staleness(name, rtype, want, previous_serial)
            if not stale:
                return answers
            remaining = deadline - time.monotonic()
            detail = "; ".join(f"{server}: {why}" for server, why in sorted(stale.items()))
            if remaining <= 0:
                raise TemporaryError(
                    self.target,
                    f"{name} {rtype} not yet {want} on every server after {deadline_s:g}s; "
                    f"still stale: {detail}",
                    delay=self.poll_interval_s,
                )
            log.debug("%s: waiting for %s", self.target, ", ".join(sorted(stale)))
            polls += 1
            if on_wait is not None:
                until = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=remaining)
                failing = time.monotonic() - started
                wait = min(self.poll_interval_s, remaining)
                on_wait(Waiting(self.target, f"still stale: {detail}", failing, until, wait, polls))
            time.sleep(min(self.poll_interval_s, remaining))

    def __enter__(self) -> DnsTarget:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def normalize_value(rtype: str, value: str) -> str:
    """The canonical text of a record value, so answers from any provider compare equal.

    Addresses in their compressed form, names lowercased and absolute; other types as given.
    """
    text = value.strip()
    kind = rtype.upper()
    try:
        if kind == "A":
            return str(ipaddress.IPv4Address(text))
        if kind == "AAAA":
            return str(ipaddress.IPv6Address(text))
    except ValueError:
        return text
    if kind in ("CNAME", "NS", "PTR"):
        return text.lower().rstrip(".") + "."
    return text


def normalize_name(name: str) -> str:
    return name.strip().lower().rstrip(".") + "."


def serial_newer(serial: int, than: int) -> bool:
    """RFC 1982 serial arithmetic: ``serial`` is later than ``than`` even across wraparound."""
    return 0 < (serial - than) % 2**32 < 2**31


def stale_reason(answer: RecordAnswer, want: str) -> str | None:
    """Why ``answer`` is not yet exactly ``want``, or None when it is."""
    if answer.values == (want,):
        return None
    if not answer.values:
        return "has no such record"
    return "answers " + ", ".join(answer.values)
