"""Are the primary and DR two sites? What a cluster and a service endpoint are, seen from here.

A plan can name one site twice and still validate: a DR kubeconfig copied from the
primary's, the same file through a symlink or a hard link, another URL (a tunnel, a
proxy, ``localhost``) for the same API server. A "takeover" then fences the primary and
"brings DR up" by restarting what it has just stopped. Paths and URLs cannot prove two
clusters apart; what a cluster says about itself can:

- the ``kube-system`` namespace's UID, made once when the cluster is created and never
  changed: the cluster ID most tools use;
- kubeadm clusters also publish ``kube-public/cluster-info``, readable by anyone; its UID
  serves when ``kube-system`` may not be read.

The kubeconfig file, the server's resolved address and its CA decide only when the
clusters cannot both be asked (in an incident the primary is often down).
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import socket
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from drills.errors import PermanentError, TargetError, unreadable
from drills.plan.files import call_within, read_regular_file
from drills.plan.urls import same_storage, service_key
from drills.targets.probe import ProbeResult, is_ip, serving

if TYPE_CHECKING:
    from drills.targets.sites import SiteTargets

# How long a name may take to resolve: getaddrinfo has no timeout of its own, and a
# check must not hang on a dead resolver (in an incident, the primary's often is).
RESOLVE_TIMEOUT_S = 5.0
# A CA bundle is a few certificates; the system's whole bundle is ~250 KB.
CA_FILE_LIMIT = 4 * 1024 * 1024


def _getaddrinfo(host: str, port: int, timeout: float) -> list[Any]:
    """``socket.getaddrinfo`` bounded by ``timeout`` (TimeoutError after it)."""
    return call_within(
        timeout,
        lambda: socket.getaddrinfo(host, port, type=socket.SOCK_STREAM),
        f"resolve {host}",
    )


def _resolve(host: str, port: int, timeout: float = RESOLVE_TIMEOUT_S) -> frozenset[str]:
    """Every address ``host`` resolves to here; empty when it does not resolve (in time)."""
    if not host:
        return frozenset()
    try:
        infos = _getaddrinfo(host, port, timeout)
    except (OSError, UnicodeError):  # TimeoutError is an OSError
        return frozenset()
    found = set()
    for *_, sockaddr in infos:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        found.add(str(ip))
    return frozenset(found)


@dataclass(frozen=True)
class ServerAddress:
    """Where a URL really leads: scheme, resolved addresses, port and path."""

    scheme: str
    host: str
    port: int
    path: str
    addresses: frozenset[str]

    @classmethod
    def of(cls, url: str) -> ServerAddress:
        """Where ``url`` leads; no addresses (cannot tell) when it is malformed (a port
        that is not a number, say) or its host does not resolve."""
        try:
            scheme, host, port = service_key(url)  # the plan's own normalisation
            path = urlsplit(url).path.rstrip("/")
        except ValueError:
            return cls("", "", 0, "", frozenset())
        return cls(scheme, host, port or 0, path, _resolve(host, port or 0))

    def same_listener(self, other: ServerAddress) -> bool:
        """Both lead to one listener and one path on it.

        Two different names on one address may still be two sites (a router that
        picks the backend by TLS server name or Host header), so names decide when
        both are names.
        """
        if (self.scheme, self.port, self.path) != (other.scheme, other.port, other.path):
            return False
        if not (self.addresses & other.addresses):
            return False
        return self.host == other.host or is_ip(self.host) or is_ip(other.host)

    def to_json(self) -> dict[str, Any]:
        return {
            "url": f"{self.scheme}://{self.host}:{self.port}{self.path}",
            "addresses": sorted(self.addresses),
        }


@dataclass(frozen=True)
class Verdict:
    """Whether two things are one: True, False, or None when it cannot be told."""

    same: bool | None
    by: str
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"same": self.same, "by": self.by, "detail": self.detail}


# -- clusters ------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterIdentity:
    role: str
    kubeconfig: tuple[str, int, int] | None  # (path, device, inode): a file however reached
    context: str | None
    server: ServerAddress | None
    ca: frozenset[str]  # SHA-256 of each trusted CA certificate; empty: none of its own
    kube_system_uid: str | None = None
    cluster_info_uid: str | None = None
    unasked: str | None = None  # why the cluster could not be asked who it is
    unreachable: bool = False  # it could not be reached, or something else answered for it

    def to_json(self) -> dict[str, Any]:
        return {
            "kubeconfig": self.kubeconfig[0] if self.kubeconfig else None,
            "context": self.context,
            "server": self.server.to_json() if self.server else None,
            "ca_sha256": sorted(h[:16] for h in self.ca),
            "kube_system_uid": self.kube_system_uid,
            "cluster_info_uid": self.cluster_info_uid,
            "unasked": self.unasked,
        }


def _file_key(path: str) -> tuple[str, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return os.path.realpath(path), st.st_dev, st.st_ino


def _ca_fingerprints(path: str | None) -> frozenset[str]:
    if not path:
        return frozenset()
    try:
        certs = x509.load_pem_x509_certificates(read_regular_file(Path(path), CA_FILE_LIMIT))
    except (OSError, ValueError):  # FileRefusedError (a FIFO, too large...) is an OSError
        return frozenset()
    return frozenset(hashlib.sha256(c.public_bytes(Encoding.DER)).hexdigest() for c in certs)


def _uid(obj: dict[str, Any] | None) -> str | None:
    uid = ((obj or {}).get("metadata") or {}).get("uid")
    return str(uid) if uid else None


def identify_cluster(site: SiteTargets) -> ClusterIdentity:
    """What the site's kubeconfig says, and what its cluster says about itself."""
    access = site.site.kubernetes
    key = _file_key(str(site.plan.resolve_path(access.kubeconfig))) if access.kubeconfig else None
    base = ClusterIdentity(site.role, key, access.context, None, frozenset())
    try:
        kube = site.kube  # reads the kubeconfig, which can fail too
    except TargetError as exc:  # never reached: there is no answer to judge
        return replace(_unasked(base, exc), unreachable=True)
    base = replace(base, server=ServerAddress.of(kube.server), ca=_ca_fingerprints(kube.ca_file))
    try:
        found = replace(base, kube_system_uid=_uid(kube.namespace("kube-system")))
    except PermanentError as exc:  # forbidden, say: cluster-info is readable by anyone
        found = _unasked(base, exc)
    except TargetError as exc:  # unreachable: asking for cluster-info would wait again
        return _unasked(base, exc)
    try:
        return replace(found, cluster_info_uid=_uid(kube.config_map("kube-public", "cluster-info")))
    except TargetError:
        return found  # most managed clusters have no cluster-info: the UID above decides


def _shared_file(p: ClusterIdentity, d: ClusterIdentity) -> str | None:
    """The kubeconfig both sites read, if they read one: one device and inode, whatever
    path reached it (a hard link too)."""
    if p.kubeconfig and d.kubeconfig and p.kubeconfig[1:] == d.kubeconfig[1:]:
        return p.kubeconfig[0]
    return None


def _unasked(identity: ClusterIdentity, exc: TargetError) -> ClusterIdentity:
    return replace(identity, unasked=exc.cause, unreachable=unreadable(exc))


def compare_clusters(p: ClusterIdentity, d: ClusterIdentity) -> Verdict:
    """Same cluster or not: by what the clusters say when both could be asked, else by
    kubeconfig file and server address; None when neither tells."""
    for label, attr in (
        ("kube-system namespace UID", "kube_system_uid"),
        ("kube-public/cluster-info UID", "cluster_info_uid"),
    ):
        a, b = getattr(p, attr), getattr(d, attr)
        if a and b:
            detail = f"{a} at both sites" if a == b else f"primary {a}, DR {b}"
            return Verdict(a == b, label, detail)
    shared = _shared_file(p, d)
    if shared and p.context == d.context:
        return Verdict(True, "kubeconfig", f"one file at both sites: {shared}")
    if p.server and d.server and p.server.same_listener(d.server) and p.ca == d.ca:
        where = ", ".join(sorted(p.server.addresses))
        return Verdict(True, "API server address", f"both lead to {where} port {p.server.port}")
    why = "; ".join(f"{i.role}: {i.unasked}" for i in (p, d) if i.unasked) or "no UID"
    return Verdict(None, "", f"the clusters could not both be asked ({why})")


# -- service endpoints -----------------------------------------------------------------


@dataclass(frozen=True)
class EndpointIdentity:
    role: str
    address: ServerAddress
    answer: ProbeResult

    def to_json(self) -> dict[str, Any]:
        return self.address.to_json() | {"answer": self.answer.describe()}


def compare_endpoints(p: EndpointIdentity, d: EndpointIdentity) -> Verdict:
    """Same service or not: by where the URLs lead, then by what each answers.

    Two sites answer differently: the DR standby does not serve while the primary
    does, and a site names itself. Identical 200s are one site; identical errors may
    be two sites down alike (an incident), so they leave it undecided.
    """
    if p.address.same_listener(d.address):
        where = ", ".join(sorted(p.address.addresses))
        return Verdict(True, "endpoint address", f"both lead to {where} port {p.address.port}")
    a, b = p.answer, d.answer
    if not (a.answered and b.answered):
        silent = [e.role for e in (p, d) if not e.answer.answered]
        unresolved = [e.role for e in (p, d) if not e.address.addresses]
        if unresolved:  # no addresses to compare (DNS failed): that tells nothing
            return Verdict(
                None,
                "endpoint address",
                f"cannot tell: {' and '.join(unresolved)} did not resolve, "
                f"{' and '.join(silent)} silent",
            )
        return Verdict(
            False, "endpoint address", f"different addresses ({' and '.join(silent)} silent)"
        )
    if a.digest != b.digest:
        return Verdict(False, "endpoint answers", f"primary {a.describe()}, DR {b.describe()}")
    if a.ok:
        return Verdict(True, "endpoint answers", f"both answer the same: {a.describe()}")
    return Verdict(None, "endpoint answers", f"both answer the same error: {a.describe()}")


def identify_endpoint(role: str, url: str, client: httpx.Client) -> EndpointIdentity:
    return EndpointIdentity(role, ServerAddress.of(url), serving(client, url))


# -- object storage --------------------------------------------------------------------


def compare_storage(primary_url: str | None, dr_url: str | None) -> Verdict:
    """One object storage or two, for buckets of the same name: by the URLs as written
    (one AWS partition, a host spelled two ways), then by where they lead (resolved
    address and port). None when a name does not resolve: it cannot be told."""
    if same_storage(primary_url, dr_url):
        return Verdict(True, "object storage URL", f"one storage: {primary_url or 'AWS S3'}")
    if primary_url is None or dr_url is None:
        return Verdict(False, "object storage URL", "AWS S3 at one site only")
    p, d = ServerAddress.of(primary_url), ServerAddress.of(dr_url)
    if p.same_listener(d):
        where = ", ".join(sorted(p.addresses & d.addresses))
        return Verdict(True, "object storage address", f"both lead to {where} port {p.port}")
    if not (p.addresses and d.addresses):
        return Verdict(None, "object storage address", "an S3 endpoint did not resolve")
    return Verdict(False, "object storage address", "different addresses")
