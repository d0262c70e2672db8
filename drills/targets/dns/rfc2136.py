"""RFC 2136 dynamic updates signed with TSIG (dnspython); its errors are translated here.

Reads go to every listed server directly, over UDP with a fall back to TCP when an
answer is truncated (a truncated UDP answer holds only part of the record set). Updates
go over TCP to the first server, the primary master, which the others transfer from.
"""

from __future__ import annotations

import binascii
import ipaddress
import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.tsig
import dns.update

from drills.errors import MisroutedError, PermanentError, TargetError, TemporaryError
from drills.plan import ExternalDnsController, Rfc2136Dns, TsigAlgorithm
from drills.targets.dns.records import (
    DEFAULT_TIMEOUT_S,
    ChangeResult,
    DnsTarget,
    RecordAnswer,
    normalize_value,
    serial_newer,
    stale_reason,
)
from drills.targets.retry import DEFAULT_POLICY, RetryPolicy, TimedOut, retry_call

log = logging.getLogger("drills.targets.dns")

_ALGORITHMS: dict[TsigAlgorithm, dns.name.Name] = {
    TsigAlgorithm.HMAC_SHA256: dns.tsig.HMAC_SHA256,
    TsigAlgorithm.HMAC_SHA384: dns.tsig.HMAC_SHA384,
    TsigAlgorithm.HMAC_SHA512: dns.tsig.HMAC_SHA512,
    TsigAlgorithm.HMAC_SHA1: dns.tsig.HMAC_SHA1,
    TsigAlgorithm.HMAC_MD5: dns.tsig.HMAC_MD5,
}

# What each refusal means to an operator. Everything not listed here is permanent too.
_RCODE_CAUSES: dict[int, str] = {
    dns.rcode.SERVFAIL: "SERVFAIL: the server could not answer (zone not loaded?)",
    dns.rcode.REFUSED: "REFUSED: the server does not allow this (update ACL, or query policy)",
    dns.rcode.NOTAUTH: "NOTAUTH: the server is not authoritative for the zone, "
    "or did not accept the TSIG key",
    dns.rcode.NOTZONE: "NOTZONE: the record is not inside the zone",
    dns.rcode.NOTIMP: "NOTIMP: the server does not implement dynamic updates",
    dns.rcode.FORMERR: "FORMERR: the server could not parse our message",
    dns.rcode.NXRRSET: "NXRRSET: a prerequisite failed (the record set does not exist)",
    dns.rcode.YXRRSET: "YXRRSET: a prerequisite failed (the record set exists)",
    dns.rcode.YXDOMAIN: "YXDOMAIN: a prerequisite failed (the name exists)",
}
_RETRYABLE_RCODES = frozenset({dns.rcode.SERVFAIL})
_PREREQUISITE_RCODES = frozenset({dns.rcode.NXRRSET, dns.rcode.YXRRSET, dns.rcode.YXDOMAIN})
# A UDP query is sent up to this many times within its one timeout: a lost datagram
# is retransmitted, as a stub resolver does, while a hung server still costs no more
# than ``timeout_s``.
UDP_TRIES = 3


def parse_server(server: str) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[v6]:port`` (as the plan validated it) → (host, port)."""
    if server.startswith("["):
        host, _, rest = server[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else 53
    if server.count(":") == 1:
        host, port = server.split(":")
        return host, int(port)
    return server, 53


class Rfc2136Target(DnsTarget):
    """A zone served by ``servers`` (the first is the primary master), changed with TSIG."""

    def __init__(
        self,
        config: Rfc2136Dns | ExternalDnsController,
        tsig_secret: str | None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy = DEFAULT_POLICY,
        tsig_name: str | None = None,
    ) -> None:
        """``tsig_name`` is the key's name when the plan gives it by reference (resolved);
        otherwise the plan's own ``tsig.name``. Without a ``tsig_secret`` (a zone another
        controller changes, such as external-dns) it only reads, and refuses updates."""
        self.config = config
        self.retry = retry
        self.servers: tuple[str, ...] = tuple(config.servers)
        self.zone = dns.name.from_text(config.zone)
        self.timeout_s = timeout_s
        self.target = f"dns rfc2136 {', '.join(self.servers)} zone {config.zone}"
        self._key: dns.tsig.Key | None = None
        self._key_name = tsig_name or ""
        if tsig_secret is None or not isinstance(config, Rfc2136Dns):
            return
        self._key_name = tsig_name or config.tsig.name
        try:
            self._key = dns.tsig.Key(
                self._key_name, tsig_secret, _ALGORITHMS[config.tsig.algorithm]
            )
        except (binascii.Error, ValueError):
            raise PermanentError(
                self.target,
                f"the TSIG secret for key {config.tsig.name} ({config.tsig.secret}) "
                "is not valid base64",
            ) from None

    def __repr__(self) -> str:  # the key object holds the secret; never show it
        return f"Rfc2136Target({self.target!r})"

    @property
    def primary(self) -> str:
        return self.servers[0]

    def server_target(self, server: str) -> str:
        return f"dns rfc2136 {server} zone {self.config.zone}"

    # -- reads --------------------------------------------------------------------
    def read(self, name: str, rtype: str) -> list[RecordAnswer]:
        return [self.read_server(server, name, rtype) for server in self.servers]

    def read_server(self, server: str, name: str, rtype: str) -> RecordAnswer:
        """The record and the zone's SOA serial, as ``server`` answers them."""
        qname, rdtype = dns.name.from_text(name), dns.rdatatype.from_text(rtype)
        reply = self._query(server, qname, rdtype)
        values: tuple[str, ...] = ()
        ttl: int | None = None
        rrset = reply.get_rrset(reply.answer, qname, dns.rdataclass.IN, rdtype)
        if rrset is not None:
            values = tuple(sorted(normalize_value(rtype, rd.to_text()) for rd in rrset))
            ttl = rrset.ttl
        return RecordAnswer(server, values, ttl, self._serial(server))

    def _serial(self, server: str) -> int:
        reply = self._query(server, self.zone, dns.rdatatype.SOA)
        soa = reply.get_rrset(reply.answer, self.zone, dns.rdataclass.IN, dns.rdatatype.SOA)
        if soa is None:
            raise MisroutedError(
                self.server_target(server), f"answers no SOA for zone {self.config.zone}"
            )
        return int(soa[0].serial)

    def _query(
        self, server: str, qname: dns.name.Name, rdtype: dns.rdatatype.RdataType
    ) -> dns.message.Message:
        """One authoritative answer; lost datagrams and SERVFAILs are asked again."""
        per_try = self.timeout_s / UDP_TRIES
        policy = self.retry.with_(
            attempts=UDP_TRIES, retry_timeouts=True, deadline_s=self.timeout_s - per_try / 2
        )
        try:
            return retry_call(
                lambda: self._query_once(server, qname, rdtype, per_try), policy=policy
            )
        except TimedOut as exc:
            cause = f"timed out: no answer within {self.timeout_s:g}s ({UDP_TRIES} tries)"
            raise TimedOut(exc.target, cause, delay=0.0) from None

    def _query_once(
        self,
        server: str,
        qname: dns.name.Name,
        rdtype: dns.rdatatype.RdataType,
        timeout_s: float,
    ) -> dns.message.Message:
        target = self.server_target(server)
        host, port = parse_server(server)
        query = dns.message.make_query(qname, rdtype)
        address = _address(target, host)
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        with translated(target, timeout_s), socket.socket(family, socket.SOCK_DGRAM) as udp:
            # Connected, the socket hears an ICMP "port unreachable" at once, so a
            # server that is down fails now instead of at the timeout.
            udp.connect((address, port))
            udp.setblocking(False)
            # udp_with_fallback re-asks over TCP when the UDP answer is truncated (TC).
            reply, _ = dns.query.udp_with_fallback(
                query, address, timeout=timeout_s, port=port, udp_sock=udp
            )
        if reply.flags & dns.flags.TC:
            raise PermanentError(target, "the answer is truncated even over TCP")
        rcode = reply.rcode()
        if rcode not in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN):
            error = rcode_error(target, rcode)
            if isinstance(error, TemporaryError):
                raise error
            # A query refused is a record unread, never one "missing".
            raise MisroutedError(target, f"{error.cause} (a query in zone {self.zone})")
        if not reply.flags & dns.flags.AA:
            raise MisroutedError(
                target, f"the answer is not authoritative: the server does not serve {self.zone}"
            )
        return reply

    def _staleness(
        self, name: str, rtype: str, want: str, previous_serial: int | None
    ) -> tuple[list[RecordAnswer], dict[str, str]]:
        answers: list[RecordAnswer] = []
        stale: dict[str, str] = {}
        for server in self.servers:
            try:
                answer = self.read_server(server, name, rtype)
            except TemporaryError as exc:  # a server down right now may come back in time
                stale[server] = exc.cause
                continue
            answers.append(answer)
            why = stale_reason(answer, want)
            if (
                why is None
                and previous_serial is not None
                and answer.serial is not None
                and not serial_newer(answer.serial, previous_serial)
            ):
                why = f"SOA serial {answer.serial} has not moved past {previous_serial}"
            if why is not None:
                stale[server] = why
        return answers, stale

    # -- changes ------------------------------------------------------------------
    def update(self, name: str, rtype: str, value: str, ttl: int) -> ChangeResult:
        try:
            rdata = dns.rdata.from_text(dns.rdataclass.IN, rtype, value)
        except (dns.exception.DNSException, ValueError) as exc:
            raise PermanentError(
                self.target, f"{value!r} is not a valid {rtype} value: {exc}"
            ) from None

        def once() -> None:
            # A replace sets the record set whole: sending it twice changes nothing more.
            message = self._update_message()
            message.replace(name, ttl, rdata)
            rcode = self._send_update(message)
            if rcode != dns.rcode.NOERROR:
                raise rcode_error(self.server_target(self.primary), rcode)

        retry_call(once, policy=self.retry)
        log.info("%s: %s %s set to %s (TTL %d)", self.target, name, rtype, value, ttl)
        return ChangeResult(self.target, name, rtype, value, ttl, sent_to=self.primary)

    def delete(self, name: str, rtype: str) -> None:
        def once() -> None:
            # Deleting a record set that is not there is no error: sent twice, it is one delete.
            message = self._update_message()
            message.delete(name, rtype)
            rcode = self._send_update(message)
            if rcode != dns.rcode.NOERROR:
                raise rcode_error(self.server_target(self.primary), rcode)

        retry_call(once, policy=self.retry)
        log.info("%s: %s %s removed", self.target, name, rtype)

    def check_control(self, name: str, rtype: str) -> None:
        """A TSIG-signed update with one true prerequisite and no change at all.

        The server authenticates the key (BADSIG/BADKEY/BADTIME otherwise), checks
        the zone's ``allow-update`` ACL (REFUSED otherwise), evaluates the
        prerequisite and applies nothing. The prerequisite follows what the primary
        answers now ("record set exists", or "does not exist"), so it holds.

        Limit: servers that grant updates per record (BIND ``update-policy``) check
        the grant only for records being changed, so there a prerequisite-only update
        proves the key and the zone, not the grant for this name.
        """
        retry_call(lambda: self._check_control_once(name, rtype), policy=self.retry)

    def _check_control_once(self, name: str, rtype: str) -> None:
        current = self.read_server(self.primary, name, rtype)
        message = self._update_message()
        if current.exists:
            message.present(name, rtype)
        else:
            message.absent(name, rtype)
        rcode = self._send_update(message)
        if rcode in _PREREQUISITE_RCODES:
            raise TemporaryError(
                self.server_target(self.primary), f"{name} {rtype} changed while probed; retry"
            )
        if rcode != dns.rcode.NOERROR:
            raise rcode_error(self.server_target(self.primary), rcode)

    def _update_message(self) -> dns.update.UpdateMessage:
        if self._key is None:
            raise PermanentError(self.target, "reads only: this zone is changed by another")
        return dns.update.UpdateMessage(self.zone, keyring=self._key)

    def _send_update(self, message: dns.update.UpdateMessage) -> int:
        """Send to the primary master; the rcode of its verified, signed answer."""
        target = self.server_target(self.primary)
        host, port = parse_server(self.primary)
        with translated(target, self.timeout_s, key_name=self._key_name):
            # TCP: an update and its signed answer must never be truncated.
            reply = dns.query.tcp(
                message, _address(target, host), timeout=self.timeout_s, port=port
            )
        rcode = reply.rcode()
        if rcode == dns.rcode.NOERROR and not reply.had_tsig:
            raise PermanentError(target, "the answer to a signed update was not signed")
        return int(rcode)


def rcode_error(target: str, rcode: int) -> TargetError:
    cause = _RCODE_CAUSES.get(
        rcode, f"{dns.rcode.to_text(dns.rcode.Rcode.make(rcode))}: the server refused"
    )
    if rcode in _RETRYABLE_RCODES:
        return TemporaryError(target, cause, delay=0.0)
    return PermanentError(target, cause)


def _address(target: str, host: str) -> str:
    """An IP address for ``host``: dnspython sends only to addresses, not names."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_DGRAM)
    except OSError as exc:
        raise TemporaryError(target, f"cannot resolve {host}: {exc.strerror or exc}") from None
    return str(infos[0][4][0])


@contextmanager
def translated(target: str, timeout_s: float, *, key_name: str = "") -> Iterator[None]:
    """dnspython and socket failures as drills errors. Messages never carry key material."""
    try:
        yield
    except (dns.exception.DNSException, EOFError, OSError) as exc:
        raise _translation(exc, target, timeout_s, key_name) from None


_TIMED_OUT = "timed out: no answer within {timeout:g}s"
# Each failure, the drills error it becomes and its message; the first match wins, as in
# a chain of `except` clauses (so subclasses come before their bases).
_Caught = type[BaseException] | tuple[type[BaseException], ...]
_FAILURES: tuple[tuple[_Caught, type[TargetError], str], ...] = (
    (dns.exception.Timeout, TimedOut, _TIMED_OUT),
    (dns.tsig.PeerBadSignature, PermanentError,
     "TSIG key rejected (BADSIG): the server holds another secret{key}"),
    (dns.tsig.PeerBadKey, PermanentError,
     "TSIG key rejected (BADKEY): the server does not know the key{key}"),
    (dns.tsig.PeerBadTime, PermanentError,
     "TSIG key rejected (BADTIME): the clocks differ; check NTP on both sides"),
    (dns.tsig.PeerError, PermanentError, "TSIG rejected by the server ({name})"),
    ((dns.tsig.BadSignature, dns.tsig.BadTime, dns.message.UnknownTSIGKey), PermanentError,
     "the answer's TSIG signature does not verify ({name})"),
    (dns.message.Truncated, PermanentError, "the answer is truncated"),
    ((dns.exception.FormError, dns.query.BadResponse), PermanentError, "malformed answer ({name})"),
    (EOFError, TemporaryError, "the server closed the connection"),
    (TimeoutError, TimedOut, _TIMED_OUT),
    (ConnectionRefusedError, TemporaryError, "connection refused"),
    (OSError, TemporaryError, "network error: {oserror}"),
    (dns.exception.DNSException, PermanentError, "DNS error ({name})"),
)  # fmt: skip


def _translation(exc: BaseException, target: str, timeout_s: float, key_name: str) -> TargetError:
    kind, message = next((k, m) for t, k, m in _FAILURES if isinstance(exc, t))
    cause = message.format(
        timeout=timeout_s,
        key=f" for key {key_name}" if key_name else "",
        name=type(exc).__name__,
        oserror=(exc.strerror if isinstance(exc, OSError) else None) or type(exc).__name__,
    )
    if issubclass(kind, TemporaryError):
        return kind(target, cause, delay=0.0)
    return kind(target, cause)
