"""BIND 9 ``named`` as the lab's authoritative DNS server, open to TSIG-signed updates.

The DNS switch of a drill is an RFC 2136 update signed with a TSIG key, which is what
production BIND, PowerDNS or Infoblox take. Running the real ``named`` here means the
update, the serial bump and the refusal of a wrong key are BIND's, not a fake's.
"""

from __future__ import annotations

import base64
import logging
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import dns.exception
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

from drills.errors import LabError
from drills_lab.procs import ManagedProcess, free_port, require_binary

log = logging.getLogger("drills_lab.named")

_START_TIMEOUT = 10.0


@dataclass(frozen=True)
class LabDnsRecord:
    """One resource record of the lab zone.

    ``name`` is relative to the zone (``api``) or absolute with a trailing dot;
    ``value`` is the RDATA in zone-file text (``127.0.0.2``).
    """

    name: str
    type: str
    ttl: int
    value: str

    def zone_line(self) -> str:
        for part in (self.name, self.type):
            if not part or any(ch.isspace() for ch in part) or ";" in part:
                raise LabError(f"invalid DNS record field {part!r}")
        if "\n" in self.value or "\r" in self.value:
            raise LabError(f"invalid DNS record value for {self.name}")
        if self.ttl < 0:
            raise LabError(f"negative TTL for {self.name}")
        return f"{self.name} {self.ttl} IN {self.type.upper()} {self.value}"


def _quoted(path: Path) -> str:
    text = str(path)
    if '"' in text or "\n" in text:
        raise LabError(f"path unusable in a named.conf: {text!r}")
    return f'"{text}"'


class NamedServer:
    """A foreground ``named`` serving one master zone from ``workdir``.

    ``start`` rewrites the config and zone file and drops any old journal, so each
    start serves exactly ``records`` again.
    """

    tsig_algorithm = "hmac-sha256"

    def __init__(
        self,
        workdir: Path,
        *,
        zone: str = "drills.test.",
        records: Sequence[LabDnsRecord] = (),
        tsig_name: str = "drills-key",
        tsig_secret: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.workdir = Path(workdir)
        self.zone = zone if zone.endswith(".") else zone + "."
        self.records = tuple(records)
        for label, value in (("zone", self.zone), ("TSIG key name", tsig_name)):
            if not value or any(ch.isspace() or ch in '";{}' for ch in value):
                raise LabError(f"invalid {label} {value!r}")
        self.tsig_name = tsig_name
        if tsig_secret is None:
            tsig_secret = base64.b64encode(secrets.token_bytes(32)).decode("ascii")
        else:
            try:
                base64.b64decode(tsig_secret, validate=True)
            except ValueError as exc:
                raise LabError(f"TSIG secret for {tsig_name} is not valid base64") from exc
        self.tsig_secret = tsig_secret
        self.host = host
        self.port = port or free_port(host)
        self._process: ManagedProcess | None = None

    @property
    def conf_path(self) -> Path:
        return self.workdir / "named.conf"

    @property
    def zone_path(self) -> Path:
        # A directory of its own: named writes the .jnl of each update next to the zone.
        return self.workdir / "zones" / f"{self.zone.rstrip('.') or 'root'}.zone"

    @property
    def log_path(self) -> Path:
        return self.workdir / "named.log"

    def write_tsig_secret(self, path: Path) -> None:
        """Write the base64 secret alone to ``path``, readable by the owner only."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(self.tsig_secret + "\n")

    def start(self) -> None:
        """Write the config and zone, start ``named`` and wait until the zone answers."""
        if self._process is not None and self._process.running():
            return
        binary = require_binary("named", "bind9")
        self._write_files()
        process = ManagedProcess(
            f"named {self.host}:{self.port}",
            # -g: foreground, log to stderr (our log file); -4: no IPv6 sockets at all.
            [binary, "-g", "-4", "-c", str(self.conf_path)],
            log_path=self.log_path,
            cwd=self.workdir,
        )
        process.start(self._answers_soa, timeout=_START_TIMEOUT)
        self._process = process
        log.info("named serving %s on %s:%d", self.zone, self.host, self.port)

    def stop(self) -> None:
        """Stop ``named``; it flushes the journal on SIGTERM. Idempotent."""
        if self._process is not None:
            self._process.stop()
            self._process = None

    def _answers_soa(self) -> bool:
        query = dns.message.make_query(self.zone, dns.rdatatype.SOA)
        try:
            reply = dns.query.udp(query, self.host, port=self.port, timeout=0.05)
        except (dns.exception.DNSException, OSError):
            return False
        return reply.rcode() == dns.rcode.NOERROR and bool(reply.answer)

    def _write_files(self) -> None:
        zone_dir = self.zone_path.parent
        zone_dir.mkdir(parents=True, exist_ok=True)
        # A journal left by an earlier run would be replayed over the fresh zone file.
        for stale in zone_dir.glob("*.jnl"):
            stale.unlink()
        self.zone_path.write_text(self._zone_text(), encoding="ascii")
        conf_text = self._conf_text()
        fd = os.open(self.conf_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            os.fchmod(handle.fileno(), 0o600)  # the config holds the TSIG secret
            handle.write(conf_text)

    def _zone_text(self) -> str:
        lines = [
            f"$ORIGIN {self.zone}",
            "$TTL 30",
            f"@ IN SOA ns1.{self.zone} hostmaster.{self.zone} 1 3600 600 86400 30",
            f"@ IN NS ns1.{self.zone}",
            f"ns1 IN A {self.host}",
        ]
        lines.extend(record.zone_line() for record in self.records)
        return "\n".join(lines) + "\n"

    def _conf_text(self) -> str:
        workdir = _quoted(self.workdir.resolve())
        return f"""options {{
    directory {workdir};
    listen-on port {self.port} {{ {self.host}; }};
    listen-on-v6 {{ none; }};
    pid-file {_quoted((self.workdir / "named.pid").resolve())};
    session-keyfile none;
    managed-keys-directory {workdir};
    recursion no;
    dnssec-validation no;
    notify no;
    minimal-responses yes;
}};
controls {{ }};
key "{self.tsig_name}" {{
    algorithm {self.tsig_algorithm};
    secret "{self.tsig_secret}";
}};
zone "{self.zone}" {{
    type master;
    file {_quoted(self.zone_path.resolve())};
    allow-update {{ key "{self.tsig_name}"; }};
}};
"""

    def __enter__(self) -> NamedServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"NamedServer({self.zone!r} on {self.host}:{self.port})"
