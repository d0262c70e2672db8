"""URLs in a plan: what a URL field may hold, and when two URLs name the same service.

A URL field holds where a service is, never how to log in to it: no user info and
no credential in the query. Two URLs that differ only in case, a default port or
a trailing slash name the same service; a plan that gives "both sites" the same
one has one site, and a drill of it would fence the only copy.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from drills.text import control_characters, sensitive_params, split_url

_DEFAULT_PORTS = {"http": 80, "https": 443}
# S3 bucket names are global within an AWS partition, whatever the regional endpoint.
_AWS_PARTITIONS = ((".amazonaws.com.cn", "aws-cn"), (".amazonaws.com", "aws"))


def check_http_url(value: str) -> str:
    """Validate an http(s) URL with a host and no credentials in it."""
    if control_characters(value) or any(c.isspace() for c in value):
        raise ValueError("must not contain spaces or control characters")
    _check_no_credentials(value)
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise ValueError("is not a valid URL") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError("must be an http:// or https:// URL")
    if not parts.hostname:
        raise ValueError("must name a host, e.g. https://host:port/path")
    if port == 0:
        raise ValueError("port 0 is not a valid port")
    return value


def _check_no_credentials(value: str) -> None:
    split = split_url(value)
    if split is None:
        return
    _, userinfo, _, query, fragment = split
    if "@" in value.split("?", 1)[0].split("#", 1)[0]:
        # Any '@' before the query: it is user info to some parsers and a path to others,
        # and either way a password can hide in it ("user:pa/ss@host").
        what = "a password (user:password@)" if ":" in userinfo else "user info (user@)"
        raise ValueError(
            f"must not contain {what}; give credentials by reference in the auth or "
            "credentials section (an '@' in a path is written %40)"
        )
    for part in (query, fragment):
        names = sensitive_params(part or "")
        if names:
            raise ValueError(
                f"must not carry a credential in the query: parameter `{names[0][:40]}`; "
                "give credentials by reference (env:NAME, file:PATH or prefect:BLOCK) "
                "in the auth or credentials section"
            )


def _host(hostname: str) -> str:
    """The host's one spelling: lowercase, no trailing dot, an address in its usual form
    whatever form it was written in (``127.1``, ``0x7f000001``, ``::ffff:127.0.0.1`` are
    all 127.0.0.1)."""
    host = hostname.lower().rstrip(".")
    address = _address(host)
    return str(address) if address is not None else host


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None
    try:
        ip = ipaddress.ip_address(host.split("%")[0])  # ::0:1 and ::1 are one address
    except ValueError:
        ip = _inet_aton(host)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _inet_aton(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 forms that resolvers accept and ``ipaddress`` does not: ``127.1``,
    ``0x7f000001``, ``2130706433``, ``0177.0.0.1`` (what getaddrinfo makes of them)."""
    if not host or not all(c in "0123456789abcdefx." for c in host):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def _is_loopback_name(host: str) -> bool:
    # RFC 6761: localhost and every name under it are this machine, whatever DNS says.
    return host == "localhost" or host.endswith(".localhost")


def host_addresses(hostname: str) -> frozenset[str]:
    """The addresses a host is known to be without asking DNS: an address (in any spelling)
    is itself, localhost is the loopback addresses; any other name is only itself."""
    host = _host(hostname)
    if _is_loopback_name(host):
        return frozenset({"127.0.0.1", "::1", "localhost"})
    if host in ("127.0.0.1", "::1"):
        return frozenset({host, "localhost"})
    return frozenset({host})


def service_key(url: str) -> tuple[str, str, int | None]:
    """``(scheme, host, port)`` with case, trailing dots and default ports normalised."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or _DEFAULT_PORTS.get(scheme)
    return scheme, _host(parts.hostname or ""), port


def endpoint_key(url: str) -> tuple[str, str, int | None, str]:
    """:func:`service_key` and the path without trailing slashes: one S3-style endpoint."""
    return (*service_key(url), urlsplit(url).path.rstrip("/"))


def storage_key(endpoint_url: str | None) -> tuple[str | int | None, ...]:
    """What decides whether two buckets of the same name are one bucket.

    On AWS (no endpoint, or any ``*.amazonaws.com`` one) bucket names are global in
    the partition; elsewhere they are per endpoint.
    """
    if endpoint_url is None:
        return ("aws",)
    host = _host(urlsplit(endpoint_url).hostname or "")
    for suffix, partition in _AWS_PARTITIONS:
        if host.endswith(suffix):
            return (partition,)
    return endpoint_key(endpoint_url)


def same_storage(a: str | None, b: str | None) -> bool:
    """Whether two S3 endpoints (None: AWS) are one object storage, as far as the URLs
    show: one AWS partition, or one port and path on a host written two ways
    (``localhost`` and ``127.0.0.1``, ``127.1``, ``[::ffff:127.0.0.1]``, a trailing dot).
    Names that resolve alike are compared at run time, by address (sites.distinct)."""
    key_a, key_b = storage_key(a), storage_key(b)
    if key_a == key_b:
        return True
    if a is None or b is None or len(key_a) != 4 or len(key_b) != 4:
        return False
    (_, _, port_a, path_a), (_, _, port_b, path_b) = key_a, key_b
    hosts_a = host_addresses(urlsplit(a).hostname or "")
    hosts_b = host_addresses(urlsplit(b).hostname or "")
    return (port_a, path_a) == (port_b, path_b) and bool(hosts_a & hosts_b)
