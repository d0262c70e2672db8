"""The plan's SLO expressions, checked by Prometheus's own parser before a run."""

from __future__ import annotations

from drills.checks.base import CheckContext, Outcome, Status, check
from drills.errors import TargetError
from drills.targets.http import new_client
from drills.targets.prometheus_api import QUERY_TIMEOUT_S, parse_problem, prometheus_url

CHECK_ID = "slo.valid"


@check(
    CHECK_ID,
    title="SLO expressions are valid PromQL",
    category="Plan",
    timeout_s=20,
    reads=(
        "The Prometheus of cost.prometheus or DRILLS_PROMETHEUS_URL: its parser, through "
        "/api/v1/parse_query, or an instant query where the server has no such path."
    ),
    blocks=(
        "An SLO's expression Prometheus cannot parse (named, with Prometheus's message); "
        "SLOs without a Prometheus to ask; Prometheus not answering while an SLO is required."
    ),
    warns="Prometheus not answering while every SLO is `required: false`.",
    remediation=(
        "Fix the expression as Prometheus's message says (try it in Prometheus's own query "
        "page), and give the plan cost.prometheus or DRILLS_PROMETHEUS_URL."
    ),
)
def slo_valid(ctx: CheckContext) -> Outcome:
    """Every SLO of the plan is an expression Prometheus's parser accepts.

    An SLO that cannot parse can never be OK, so a drill with one could only fail after
    the primary was fenced: **fail, blocking**, naming the SLO and Prometheus's message.
    A Prometheus that does not answer now would leave the SLOs `unverified` after the
    switch, which fails a drill too: **fail, blocking** while any SLO is required, a
    warning when none is.
    """
    slos = ctx.plan.slo
    if not slos:
        return Outcome(Status.PASS, "The plan has no SLOs.")
    url = prometheus_url(ctx.plan)
    if url is None:
        return Outcome(
            Status.FAIL,
            f"{len(slos)} SLO(s) but no Prometheus: give cost.prometheus or DRILLS_PROMETHEUS_URL",
            blocking=True,
        )
    evidence: dict[str, object] = {"prometheus": url}
    try:
        with new_client(read_timeout=QUERY_TIMEOUT_S) as client:
            problems = {s.name: parse_problem(url, s.expr, client) for s in slos}
    except TargetError as exc:
        required = any(s.required for s in slos)
        return Outcome(
            Status.FAIL if required else Status.WARN,
            f"the SLOs cannot be checked: {exc}",
            {**evidence, "error": str(exc)},
            blocking=required,
        )
    bad = {name: message for name, message in problems.items() if message}
    evidence["invalid"] = bad
    evidence["checked"] = len(problems)
    if bad:
        first, message = next(iter(bad.items()))
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        return Outcome(Status.FAIL, f"SLO {first!r}: {message}{more}", evidence, blocking=True)
    return Outcome(Status.PASS, f"{len(problems)} SLO expression(s) parse", evidence)
