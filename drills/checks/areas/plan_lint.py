"""The plan itself: settings that validate but defeat the plan's own purpose."""

from __future__ import annotations

from drills.checks.base import CheckContext, Outcome, Status, check

_REMEDIATION = (
    "Change the settings named in the evidence; `drills plan validate PLAN` shows each "
    "warning at its file, line and field."
)


@check(
    "plan.warnings",
    title="Plan without warnings",
    category="Plan",
    timeout_s=5,
    reads="The plan alone, through its validation.",
    blocks="Never: a plan that could do harm is refused by validation before readiness.",
    warns=(
        "The plan validates with warnings (a DNS TTL as long as the RTO, an RPO longer than "
        "the time between drills, a schedule drilling more often than daily or less than "
        "quarterly)."
    ),
    remediation=(
        "Change the plan fields each warning names, then validate it again with `drills plan "
        "validate`."
    ),
)
def plan_warnings(ctx: CheckContext) -> Outcome:
    """The plan validates without warnings: no DNS TTL as long as the RTO, no RPO longer
    than the time between scheduled drills, no schedule that drills more often than
    daily or leaves more than 92 days between drills.

    A warning never blocks: the plan can run, it only proves less than it claims.
    Plans that could do harm are refused by validation and never reach readiness.
    """
    found = ctx.plan.warnings
    if not found:
        return Outcome(Status.PASS, "the plan validates without warnings", {"warnings": []})
    evidence = {
        "warnings": [
            {"code": w.code, "path": w.path, "line": w.line, "message": w.message} for w in found
        ]
    }
    first = found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return Outcome(
        Status.WARN,
        f"{first.path}: {first.message}{more}",
        evidence,
        remediation=_REMEDIATION,
    )
