"""The DNS record a drill switches: read it on every authoritative server, change it, confirm.

records (what a server answers, and DnsTarget, the interface every provider shares),
from_plan (dns_for: the built-in provider a plan names), rfc2136 (dynamic updates signed
with TSIG), route53 (Amazon Route 53), externaldns (external-dns as the provider: drills writes the
resource it reads, and confirms on the zone's servers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drills.faces import lazy_face

if TYPE_CHECKING:
    from drills.targets.dns.externaldns import (
        OWNER_LABEL,
        TTL_ANNOTATION,
        external_dns_for,
        parse_labels,
        txt_names,
    )
    from drills.targets.dns.from_plan import dns_for
    from drills.targets.dns.records import (
        DEFAULT_TIMEOUT_S,
        ChangeResult,
        DnsTarget,
        RecordAnswer,
        normalize_name,
        normalize_value,
        serial_newer,
    )
    from drills.targets.dns.rfc2136 import Rfc2136Target
    from drills.targets.dns.route53 import Route53Target

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "OWNER_LABEL",
    "TTL_ANNOTATION",
    "ChangeResult",
    "DnsTarget",
    "RecordAnswer",
    "Rfc2136Target",
    "Route53Target",
    "dns_for",
    "external_dns_for",
    "normalize_name",
    "normalize_value",
    "parse_labels",
    "serial_newer",
    "txt_names",
]

__getattr__ = lazy_face(
    __name__,
    {
        "externaldns": [
            "OWNER_LABEL",
            "TTL_ANNOTATION",
            "external_dns_for",
            "parse_labels",
            "txt_names",
        ],
        "from_plan": ["dns_for"],
        "records": [
            "DEFAULT_TIMEOUT_S",
            "ChangeResult",
            "DnsTarget",
            "RecordAnswer",
            "normalize_name",
            "normalize_value",
            "serial_newer",
        ],
        "rfc2136": ["Rfc2136Target"],
        "route53": ["Route53Target"],
    },
)
