"""DNS readiness: the record's TTL fits the objectives, and we can switch the record."""

from __future__ import annotations

from dataclasses import dataclass

from drills.checks.base import CheckContext, Outcome, Status, check, worst
from drills.errors import PermanentError, unreadable
from drills.plan import ExternalDnsController, Rfc2136Dns, Route53Dns
from drills.targets.dns import RecordAnswer, normalize_value
from drills.timefmt import duration


@dataclass(frozen=True)
class _Problem:
    status: Status
    blocking: bool
    message: str


def _secs(seconds: float) -> str:
    return duration(seconds)


def _points_at(answer: RecordAnswer, primary: str, dr: str) -> str:
    if answer.values == (primary,):
        return "primary"
    if answer.values == (dr,):
        return "dr"
    return "none" if not answer.values else "other"


@check(
    "dns.ttl",
    title="DNS TTL within the plan's bounds",
    category="DNS",
    timeout_s=15,
    reads="The switched record on every authoritative server of its zone (DNS queries).",
    blocks="The TTL is at or above the RTO objective, or the record is missing on a server.",
    warns=(
        "Fails without blocking when the TTL is over dns.max_ttl but under the RTO; warns "
        "when servers disagree, or the record already points at the DR value (or at neither "
        "site) outside a drill."
    ),
    remediation=(
        "Lower the record's TTL to at most dns.max_ttl well before the drill, and make every "
        "authoritative server serve the same record."
    ),
)
def dns_ttl(ctx: CheckContext) -> Outcome:
    """The switched record's TTL, on every authoritative server, is at most the plan's
    `dns.max_ttl`.

    After the switch, resolvers keep serving the old address (the fenced primary)
    until their cached copy expires: the TTL adds straight to the RTO clients see.
    - A TTL at or above the RTO objective alone breaks the RTO even if the takeover
      were instant: **fail, blocking**.
    - A TTL over `max_ttl` but under the RTO eats into the RTO's margin: **fail**, not
      blocking.
    - A record missing on any server: **fail, blocking** (there is nothing to switch).
    - Servers that disagree (value or TTL), or a record that already points at the DR
      value (or at neither site) outside a drill: **warn**.

    Lower a TTL well before a drill: resolvers honour the old, longer TTL until it runs out.
    """
    plan, targets = ctx.plan, ctx.targets
    config = plan.dns
    name, rtype = config.record.name, config.record.type.value
    primary = normalize_value(rtype, config.primary_value)
    dr = normalize_value(rtype, config.dr_value)
    rto, max_ttl = plan.objectives.rto, config.max_ttl
    answers = targets.dns.read(name, rtype)

    problems: list[_Problem] = []
    missing = [a.server for a in answers if not a.exists]
    if missing:
        problems.append(
            _Problem(Status.FAIL, True, f"no {rtype} record {name} on {', '.join(missing)}")
        )
    ttls = {a.server: a.ttl for a in answers if a.ttl is not None}
    longest = max(ttls.values(), default=None)
    if longest is not None and longest >= rto:
        problems.append(
            _Problem(
                Status.FAIL,
                True,
                f"TTL {_secs(longest)} alone breaks the RTO of {_secs(rto)}: clients may keep "
                "the primary's address that long after the switch",
            )
        )
    elif longest is not None and longest > max_ttl:
        problems.append(
            _Problem(
                Status.FAIL,
                False,
                f"TTL {_secs(longest)} is over the plan's maximum of {_secs(max_ttl)}",
            )
        )
    present = [a for a in answers if a.exists]
    if len({a.values for a in present}) > 1 or len(set(ttls.values())) > 1:
        detail = "; ".join(f"{a.server}: {', '.join(a.values)} TTL {a.ttl}" for a in present)
        problems.append(_Problem(Status.WARN, False, f"servers disagree ({detail})"))
    points = sorted({_points_at(a, primary, dr) for a in present})
    if "dr" in points:
        problems.append(_Problem(Status.WARN, False, f"{name} already points at the DR value {dr}"))
    if "other" in points:
        problems.append(
            _Problem(Status.WARN, False, f"{name} points at neither {primary} nor {dr}")
        )

    evidence = {
        "record": name,
        "type": rtype,
        "max_ttl_s": max_ttl,
        "rto_s": rto,
        "longest_ttl_s": longest,
        "primary_value": primary,
        "dr_value": dr,
        "points_at": points,
        "servers": [a.to_json() for a in answers],
        "problems": [p.message for p in problems],
    }
    if not problems:
        return Outcome(
            Status.PASS,
            f"{name} {rtype} → {primary} (primary), TTL {_secs(longest or 0)} ≤ "
            f"{_secs(max_ttl)} on {len(answers)} server(s)",
            evidence,
        )
    status = worst(p.status for p in problems)
    ttl_problem = longest is not None and longest > max_ttl
    return Outcome(
        status,
        "; ".join(p.message for p in problems),
        evidence,
        remediation=(
            f"Lower the TTL of {name} to at most {_secs(max_ttl)} at the DNS provider, "
            f"at least {_secs(longest or 0)} (the old TTL) before a drill."
            if ttl_problem
            else f"Make every server answer {name} {rtype} {primary} outside a drill; "
            "if a drill or incident left it at DR, fail back first."
        ),
        blocking=any(p.blocking for p in problems),
    )


@check(
    "dns.control",
    title="DNS record can be switched",
    category="DNS",
    timeout_s=15,
    reads=(
        "The DNS provider with the plan's credentials: a TSIG-signed RFC 2136 update with "
        "only a prerequisite, or Route 53's hosted zone, record and a change batch that must "
        "be rejected; for external-dns, a dry-run patch of its resource and its TXT registry "
        "entry."
    ),
    blocks=(
        "The provider refuses our credentials or the change (BADSIG, BADKEY, BADTIME, "
        "REFUSED, AccessDenied); external-dns does not own the record for the plan's owner "
        "id. An unreachable provider, or a server that does not serve the"
        " zone, is an error and blocks too."
    ),
    warns="Never.",
    remediation=(
        "Fix the DNS credentials (TSIG key and server clock, or the IAM policy) and the "
        "zone's update policy so they may change the switched record."
    ),
)
def dns_control(ctx: CheckContext) -> Outcome:
    """The DNS provider answers and our credentials can change the switched record,
    proven without changing it.

    - RFC 2136: a TSIG-signed update carrying only a prerequisite that holds and no
      change. The server checks the key (a wrong secret is BADSIG, an unknown key
      BADKEY, a clock skew BADTIME) and the zone's update ACL (REFUSED), then applies
      nothing.
    - Route 53: the hosted zone and the record are read, and a change batch that must
      be rejected after IAM allowed it (the DELETE of a random name that does not
      exist) tells AccessDenied from allowed. A policy granting only UPSERT of this
      one name refuses that probe too: the check then fails on the safe side.
    - external-dns: a server-side dry run of the patch a switch makes to its resource
      (DNSEndpoint, or a Service/Ingress annotation), and its TXT registry entry for the
      record: it must name `heritage=external-dns`, the plan's `owner_id` and resource.
      Another owner fails naming both, as two controllers would fight over the record.

    A refusal fails and blocks: without it, a takeover could not switch DNS. An
    unreachable provider, or a server that does not serve the zone (it answers without
    authority, or refuses the query), is an error: it refused nothing.
    """
    plan, targets = ctx.plan, ctx.targets
    config = plan.dns
    name, rtype = config.record.name, config.record.type.value
    adapter = targets.dns
    if isinstance(config, Rfc2136Dns):
        method = (
            f"TSIG-signed prerequisite-only update to {config.servers[0]} with key "
            f"{config.tsig.name} ({config.tsig.algorithm.value}); changes nothing"
        )
        remediation = (
            f"Make the TSIG key {config.tsig.name} ({config.tsig.algorithm.value}) read from "
            f"{config.tsig.secret} match the server's key of that name, and let the zone "
            f"{config.zone} accept updates signed with it (allow-update / update-policy)."
        )
    elif isinstance(config, Route53Dns):
        method = (
            "get_hosted_zone, list_resource_record_sets, and a change probe that Route 53 "
            "rejects atomically (DELETE of a random, non-existent name)"
        )
        remediation = (
            "Grant the plan's AWS credentials route53:GetHostedZone, "
            "route53:ListResourceRecordSets, route53:ChangeResourceRecordSets and "
            f"route53:GetChange on hostedzone/{config.hosted_zone_id}."
        )
    elif isinstance(config, ExternalDnsController):
        res = config.resource
        method = (
            f"a server-side dry-run patch of {res.kind} {res.namespace}/{res.name} at "
            f"{config.site}, and external-dns's TXT registry entry for the record read on "
            f"{config.servers[0]}: owner {config.owner_id}, resource {res.registry_resource}"
        )
        remediation = (
            f"Let the {config.site} kubeconfig patch {res.kind} {res.namespace}/{res.name}, "
            f"and run external-dns there with --txt-owner-id={config.owner_id} (and "
            f"--txt-prefix={config.txt_prefix!r}) as the only controller owning {name}."
        )
    else:
        method = f"the {config.provider} provider's own probe, which changes nothing"
        remediation = f"Let the {config.provider} provider's credentials change {name} {rtype}."
    evidence = {
        "provider": config.provider,
        "target": adapter.target,
        "record": name,
        "type": rtype,
        "method": method,
    }
    try:
        adapter.check_control(name, rtype)
    except PermanentError as exc:
        if unreadable(exc):
            raise
        return Outcome(
            Status.FAIL,
            f"cannot change {name} {rtype}: {exc.cause}",
            {**evidence, "refused_by": exc.target, "cause": exc.cause},
            remediation=remediation,
            blocking=True,
        )
    return Outcome(
        Status.PASS,
        f"{config.provider} accepts our changes to {name} {rtype}",
        evidence,
    )
