"""A controller that behaves like external-dns (``--source=crd --provider=rfc2136
--registry=txt``) against the lab's BIND.

Every ``sync_interval`` it reads the ``DNSEndpoint`` objects of its cluster and makes the
zone hold them, as external-dns does: a record it changes must carry its TXT registry
entry (``heritage=external-dns,external-dns/owner=<owner>,external-dns/resource=crd/ns/
name``, at both the old name and the new ``<type>-`` one); a record another owner's entry
claims, or one with no entry at all, is left alone. Updates are RFC 2136, signed with the
lab's TSIG key. Only on its next sync does a written DNSEndpoint reach the zone: that
delay is what a drill's RTO must include.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dns.exception
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.tsig
import dns.update

from drills.plan.models import EXTERNAL_DNS_TARGET
from drills.targets.dns import (
    OWNER_LABEL,
    TTL_ANNOTATION,
    parse_labels,
    txt_names,
)
from drills_lab.kubeapi.store import ResourceStore
from drills_lab.named import LabDnsRecord

log = logging.getLogger("drills_lab.externaldns")

HERITAGE = "heritage=external-dns"
HOSTNAME_ANNOTATION = "external-dns.alpha.kubernetes.io/hostname"


def registry_value(owner: str, resource: str) -> str:
    """The TXT registry value external-dns writes (labels sorted, heritage first)."""
    return f'"{HERITAGE},external-dns/owner={owner},external-dns/resource={resource}"'


def registry_names(name: str, rtype: str, prefix: str = "") -> list[str]:
    """The new-format TXT name (``<type>-``), then the old one (none for AAAA)."""
    new, old = txt_names(name, rtype, prefix)
    return [new] if rtype.upper() == "AAAA" else [new, old]


def registry_records(
    name: str, rtype: str, ttl: int, owner: str, resource: str
) -> list[LabDnsRecord]:
    """A record's registry entries as zone-file records, for a zone seeded as if the
    controller had synced it before."""
    value = registry_value(owner, resource)
    return [LabDnsRecord(txt, "TXT", ttl, value) for txt in registry_names(name, rtype)]


@dataclass(frozen=True)
class Applied:
    """One change the controller made to the zone, when."""

    at: dt.datetime
    name: str
    rtype: str
    targets: tuple[str, ...]


@dataclass(frozen=True)
class Desired:
    targets: tuple[str, ...]
    ttl: int
    resource: str


class LabExternalDns:
    """external-dns's sync loop, in a thread, over one cluster's store and one BIND zone."""

    def __init__(
        self,
        store: ResourceStore,
        *,
        server: tuple[str, int],
        zone: str,
        tsig_name: str,
        tsig_secret: str,
        owner_id: str,
        interval_s: float,
        default_ttl: int = 300,
        journal: Path | None = None,
    ) -> None:
        """``journal``, when given, gets one JSON line per change made to the zone."""
        self.store = store
        self.server = server
        self.zone = dns.name.from_text(zone)
        self.owner_id = owner_id
        self.interval_s = interval_s
        self.default_ttl = default_ttl
        self._key = dns.tsig.Key(tsig_name, tsig_secret, dns.tsig.HMAC_SHA256)
        self.applied: list[Applied] = []
        self.journal = journal
        self._managed: set[tuple[str, str]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lab-external-dns", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sync()
            except Exception:  # keep syncing, as external-dns does; the log says why
                log.exception("external-dns sync failed")

    # -- one sync -----------------------------------------------------------------
    def desired(self) -> dict[tuple[str, str], Desired]:
        """Every endpoint of every DNSEndpoint (the crd source) and annotated Service (the
        service source) inside the zone, by (name., TYPE)."""
        wanted: dict[tuple[str, str], Desired] = {}
        for source, ep in [*self._crd_endpoints(), *self._service_endpoints()]:
            name = str(ep.get("dnsName", "")).lower().rstrip(".") + "."
            if not dns.name.from_text(name).is_subdomain(self.zone):
                continue
            rtype = str(ep.get("recordType", "A")).upper()
            ttl = int(ep.get("recordTTL") or self.default_ttl)
            targets = tuple(sorted(str(t) for t in ep.get("targets") or []))
            wanted[(name, rtype)] = Desired(targets, ttl, source)
        return wanted

    def _crd_endpoints(self) -> list[tuple[str, dict[str, Any]]]:
        found = []
        for obj in self.store.list("dnsendpoints", None):
            meta = obj.get("metadata") or {}
            source = f"crd/{meta.get('namespace')}/{meta.get('name')}"
            found += [(source, ep) for ep in (obj.get("spec") or {}).get("endpoints") or []]
        return found

    def _service_endpoints(self) -> list[tuple[str, dict[str, Any]]]:
        """A Service's hostname annotation, with its target annotation (an address)."""
        found = []
        for obj in self.store.list("services", None):
            meta = obj.get("metadata") or {}
            notes = meta.get("annotations") or {}
            host, target = notes.get(HOSTNAME_ANNOTATION), notes.get(EXTERNAL_DNS_TARGET)
            if host and target:
                ttl = notes.get(TTL_ANNOTATION)
                ep = {"dnsName": host, "recordType": "A", "targets": [target],
                      "recordTTL": int(ttl) if ttl and ttl.isdigit() else None}  # fmt: skip
                found.append((f"service/{meta.get('namespace')}/{meta.get('name')}", ep))
        return found

    def sync(self) -> int:
        """Make the zone hold what the DNSEndpoints say, for the records this owner owns;
        returns how many records it changed."""
        wanted = self.desired()
        changed = 0
        for (name, rtype), want in wanted.items():
            owner = self.owner_of(name, rtype)
            current = self._answer(name, rtype)
            if owner is None and current[0]:
                log.info(
                    "%s %s exists without a registry entry: not owned, left alone", name, rtype
                )
                continue
            if owner is not None and owner != self.owner_id:
                log.info(
                    "%s %s is owned by %s, not %s: left alone", name, rtype, owner, self.owner_id
                )
                continue
            self._managed.add((name, rtype))
            if current == (want.targets, want.ttl) and owner == self.owner_id:
                continue
            self._replace(name, rtype, want)
            changed += 1
        for name, rtype in sorted(self._managed - wanted.keys()):
            if self.owner_of(name, rtype) == self.owner_id:
                self._delete(name, rtype)
                changed += 1
            self._managed.discard((name, rtype))
        return changed

    def owner_of(self, name: str, rtype: str) -> str | None:
        """The owner its registry entry names, None when there is none."""
        for txt in registry_names(name, rtype):
            for value in self._query(txt, "TXT")[0]:
                labels = parse_labels(value)
                if labels is not None:
                    return labels.get(OWNER_LABEL, "")
        return None

    def _answer(self, name: str, rtype: str) -> tuple[tuple[str, ...], int | None]:
        values, ttl = self._query(name, rtype)
        if rtype == "CNAME":
            values = tuple(v.rstrip(".") for v in values)
        return values, ttl

    def _query(self, name: str, rtype: str) -> tuple[tuple[str, ...], int | None]:
        qname, rdtype = dns.name.from_text(name), dns.rdatatype.from_text(rtype)
        reply = dns.query.udp(dns.message.make_query(qname, rdtype), self.server[0],
                              port=self.server[1], timeout=2.0)  # fmt: skip
        rrset = reply.get_rrset(reply.answer, qname, dns.rdataclass.IN, rdtype)
        if rrset is None:
            return (), None
        return tuple(sorted(rd.to_text() for rd in rrset)), rrset.ttl

    def _replace(self, name: str, rtype: str, want: Desired) -> None:
        update = dns.update.UpdateMessage(self.zone, keyring=self._key)
        if want.targets:
            update.replace(name, want.ttl, rtype, *want.targets)
        else:
            update.delete(name, rtype)
        value = registry_value(self.owner_id, want.resource)
        for txt in registry_names(name, rtype):
            update.replace(txt, want.ttl, "TXT", value)
        self._send(update)
        self._record(Applied(dt.datetime.now(dt.UTC), name, rtype, want.targets))
        log.info("external-dns: %s %s set to %s", name, rtype, ", ".join(want.targets) or "none")

    def _delete(self, name: str, rtype: str) -> None:
        update = dns.update.UpdateMessage(self.zone, keyring=self._key)
        update.delete(name, rtype)
        for txt in registry_names(name, rtype):
            update.delete(txt, "TXT")
        self._send(update)
        self._record(Applied(dt.datetime.now(dt.UTC), name, rtype, ()))
        log.info("external-dns: %s %s removed", name, rtype)

    def _record(self, change: Applied) -> None:
        self.applied.append(change)
        if self.journal is not None:
            line = {"at": change.at.isoformat(), "name": change.name, "type": change.rtype,
                    "targets": list(change.targets)}  # fmt: skip
            with self.journal.open("a") as out:
                out.write(json.dumps(line) + "\n")

    def _send(self, update: dns.update.UpdateMessage) -> None:
        reply = dns.query.tcp(update, self.server[0], port=self.server[1], timeout=5.0)
        if reply.rcode() != dns.rcode.NOERROR:
            raise dns.exception.DNSException(f"update refused: {dns.rcode.to_text(reply.rcode())}")


def dns_endpoint(
    namespace: str, name: str, record: str, rtype: str, target: str, ttl: int
) -> dict[str, Any]:
    """A DNSEndpoint as a user would apply it (externaldns.k8s.io/v1alpha1)."""
    return {
        "apiVersion": "externaldns.k8s.io/v1alpha1",
        "kind": "DNSEndpoint",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {
            "endpoints": [
                {"dnsName": record.rstrip("."), "recordType": rtype, "targets": [target],
                 "recordTTL": ttl}
            ]
        },
    }  # fmt: skip


# -- the lab's external-dns variant (`drills lab up --dns external-dns`) ----------------
NAMESPACE = "external-dns"
ENDPOINT_NAME = "api"
OWNER_ID = "drills-lab-dr"  # it runs at DR, which must switch the name when the primary is lost
SITE = "dr"
DEFAULT_INTERVAL_S = 3.0
JOURNAL_FILE = "external-dns.jsonl"  # in the state directory: each change it made, when


def lab_records(record: str, ttl: int) -> list[LabDnsRecord]:
    """The zone's registry entries for the lab's record, as if the controller synced it
    before the lab started."""
    return registry_records(record, "A", ttl, OWNER_ID, f"crd/{NAMESPACE}/{ENDPOINT_NAME}")


def start_lab_controller(
    store: ResourceStore,
    *,
    record: str,
    target: str,
    ttl: int,
    server: tuple[str, int],
    zone: str,
    tsig: tuple[str, str],
    interval_s: float,
    journal: Path | None = None,
) -> LabExternalDns:
    """Seed the DNSEndpoint the lab's record comes from, and start syncing it."""
    if store.get("namespaces", None, NAMESPACE) is None:
        store.create("namespaces", {"metadata": {"name": NAMESPACE}})
    store.create("dnsendpoints", dns_endpoint(NAMESPACE, ENDPOINT_NAME, record, "A", target, ttl))
    controller = LabExternalDns(
        store, server=server, zone=zone, tsig_name=tsig[0], tsig_secret=tsig[1],
        owner_id=OWNER_ID, interval_s=interval_s, journal=journal,
    )  # fmt: skip
    controller.start()
    return controller


def plan_section(interval_s: float) -> dict[str, Any]:
    """What the lab plan's ``dns`` says beyond the record, the servers and the zone."""
    return {
        "provider": "external-dns",
        "site": SITE,
        "resource": {"kind": "DNSEndpoint", "namespace": NAMESPACE, "name": ENDPOINT_NAME},
        "owner_id": OWNER_ID,
        "sync_interval": interval_s,
    }
