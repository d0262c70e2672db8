"""The built-in DNS adapter a plan names: RFC 2136 or Route 53, credentials resolved.

Each provider's module, and the SDK it needs, is imported only when a plan names it.
"""

from __future__ import annotations

from drills.errors import PermanentError
from drills.plan import DrillPlan, Rfc2136Dns, Route53Dns, SecretRef
from drills.plan.types import check_fqdn
from drills.targets.dns.records import DEFAULT_TIMEOUT_S, DnsTarget


def dns_for(plan: DrillPlan, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> DnsTarget:
    """The built-in adapter for ``plan.dns`` (the ``rfc2136`` and ``route53`` providers; any
    provider: drills.targets.providers.dns_adapter); resolves its credentials now (errors
    name the ref only).

    ``timeout_s`` bounds each DNS query of RFC 2136; Route 53 calls carry the AWS
    client's own connect and read timeouts (``drills.targets.aws``).
    """
    config = plan.dns
    if isinstance(config, Rfc2136Dns):
        from drills.targets.dns.rfc2136 import Rfc2136Target

        return Rfc2136Target(
            config,
            plan.resolve_secret(config.tsig.secret),
            timeout_s=timeout_s,
            tsig_name=_tsig_name(plan, config),
        )
    if not isinstance(config, Route53Dns):
        raise PermanentError("dns", f"provider {config.provider!r} is not built in")
    from drills.targets.dns.route53 import Route53Target, route53_endpoint

    return Route53Target(config, route53_endpoint(config, plan))


def _tsig_name(plan: DrillPlan, config: Rfc2136Dns) -> str:
    """The TSIG key's name, read when the plan gives it by reference, and checked as the
    plan checks a name written in it."""
    name = config.tsig.name
    if not isinstance(name, SecretRef):
        return name
    try:
        return check_fqdn(plan.resolve_secret(name))
    except ValueError:
        raise PermanentError(
            f"dns tsig key {name}", "the name it holds is not a valid DNS name"
        ) from None
