"""HTTP probes from outside a site: is it serving, and does the service answer by its DNS name?

A smoke probe resolves the name on the authoritative servers (not a caching
resolver, which may still hold the old answer for a TTL) and connects to the
answer with the original Host header: what a client sees right after the switch.
"""

from __future__ import annotations

import hashlib
import ipaddress
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpx

from drills.errors import TemporaryError
from drills.plan import SmokeProbe
from drills.targets.dns import DnsTarget
from drills.targets.http import new_client, translate

PROBE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    status: int | None
    detail: str
    address: str = ""
    digest: str = ""  # of the status and the whole body: two answers compare by it

    @property
    def answered(self) -> bool:
        """An HTTP answer came back, whatever its status; a refused or hung connection is not one.

        Only an endpoint seen answering can later be seen to stop: the silence of one
        that never answered proves nothing about what it serves to others.
        """
        return self.status is not None

    def describe(self) -> str:
        return f"HTTP {self.status} {self.detail!r}" if self.answered else self.detail


def serving(client: httpx.Client, url: str) -> ProbeResult:
    """One GET of a site endpoint: ok means it answered 200."""
    try:
        response = client.get(url)
    except httpx.HTTPError as exc:
        return ProbeResult(False, None, f"no answer: {translate(url, exc).cause}")
    digest = hashlib.sha256(f"{response.status_code}\n".encode() + response.content).hexdigest()
    return ProbeResult(
        response.status_code == 200,
        response.status_code,
        response.text[:80].strip(),
        digest=digest,
    )


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def resolve_authoritative(dns: DnsTarget, host: str) -> str:
    """The address every authoritative server gives for ``host``; raises if they disagree."""
    answers = dns.read(host.rstrip(".") + ".", "A")
    values = {tuple(a.values) for a in answers}
    if len(values) != 1 or not next(iter(values)):
        raise LookupError(f"authoritative servers disagree or have no answer for {host}: {values}")
    return next(iter(values))[0]


def smoke_once(
    client: httpx.Client, probe: SmokeProbe, dns: DnsTarget, via: str | None = None
) -> ProbeResult:
    """One probe. ``via``, when given, is the name resolved in place of the probe's own
    host (a practice reaches DR through a name of its own); the Host header stays the
    probe's, so DR is asked for what production is asked for."""
    parts = urlsplit(str(probe.url))
    host = via or parts.hostname or ""
    try:
        address = host if is_ip(host) else resolve_authoritative(dns, host)
    except LookupError as exc:
        return ProbeResult(False, None, str(exc))
    except TemporaryError as exc:  # a lost DNS answer: the next try may pass
        return ProbeResult(False, None, str(exc))
    netloc = address + (f":{parts.port}" if parts.port else "")
    url = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
    try:
        response = client.get(url, headers={"Host": parts.netloc})
    except httpx.HTTPError as exc:
        return ProbeResult(False, None, f"no answer from {address} ({type(exc).__name__})", address)
    body = response.text
    ok = response.status_code == probe.expect_status and (
        probe.expect_body is None or probe.expect_body in body
    )
    return ProbeResult(ok, response.status_code, body[:80].strip(), address)


def smoke_until(
    probe: SmokeProbe,
    dns: DnsTarget,
    *,
    interval: float = 0.1,
    stop: threading.Event | None = None,
    via: str | None = None,
) -> ProbeResult:
    """Probe until it passes, its timeout expires or ``stop`` is set; returns the last result."""
    deadline = time.monotonic() + probe.timeout
    stopped = stop or threading.Event()
    with new_client(read_timeout=PROBE_TIMEOUT_S) as client:
        while True:
            result = smoke_once(client, probe, dns, via)
            if result.ok or time.monotonic() >= deadline or stopped.wait(interval):
                return result
