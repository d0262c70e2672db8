"""Drill cadence: a DR plan nobody has exercised lately is a plan nobody can trust."""

from __future__ import annotations

from drills.checks.base import CheckContext, Outcome, Status, check
from drills.errors import TemporaryError
from drills.store.history import HistoryStore
from drills.store.models import DrillRun
from drills.store.url import StoreQueryError

MAX_DRILL_AGE_DAYS = 92  # a quarter, and a day of slack for a drill that slipped

_REMEDIATION = (
    "Run a drill of this plan (its scheduled Prefect deployment, or by hand); "
    "only a succeeded drill that was not a dry run resets the clock (a practice never does)."
)


def _last_successful(history: HistoryStore, plan: str) -> DrillRun | None:
    try:
        return history.last_successful_drill(plan)
    except StoreQueryError as exc:
        where = history.shown_url  # the URL may carry a database password
        raise TemporaryError(f"history store {where}", type(exc).__name__) from exc


@check(
    "drill.cadence",
    title="Drilled within a quarter",
    category="Cadence",
    timeout_s=10,
    reads="The history store: this plan's last run in mode drill, not a dry run, that succeeded.",
    blocks="Never: blocking would stop the very drill that brings the cadence back.",
    warns=(
        "Warns without a history store (it cannot tell); fails without blocking when the plan"
        " was never drilled or its last successful drill is more than 92 days old."
    ),
    remediation=(
        "Run a drill of the plan (`drills run PLAN`, mode drill) that succeeds and fails "
        "back, and keep a history store so the next check can see it."
    ),
)
def drill_cadence(ctx: CheckContext) -> Outcome:
    """The last successful drill of this plan, in the history store, is at most 92 days
    old: a quarterly drill, with a day of slack.

    Only a real drill counts: mode `drill`, not a dry run, status `succeeded`. An
    incident failover, a dry run, a failed drill or a practice (which never fences the
    primary nor switches the production record) proves less than a drill that completed
    and failed back.

    "Never drilled" and "too long ago" fail but do not block: blocking would stop the
    very drill that fixes them. Without a history store the check warns, as it cannot
    tell.
    """
    plan, history, now = ctx.plan, ctx.history, ctx.now
    evidence: dict[str, object] = {"plan": plan.name, "max_age_days": MAX_DRILL_AGE_DAYS}
    if history is None:
        return Outcome(
            Status.WARN,
            "no history store configured: the last drill date is unknown",
            evidence,
            remediation="Run readiness with a history store (DRILLS_DB_URL, or the default "
            ".drills/history.db) that the drills also write to.",
        )
    run = _last_successful(history, plan.name)
    if run is None:
        return Outcome(
            Status.FAIL,
            f"plan {plan.name} has never been drilled successfully",
            {**evidence, "last_run_id": None},
            remediation=_REMEDIATION,
        )
    drilled_at = run.finished_at or run.started_at
    age_days = (now - drilled_at).total_seconds() / 86400
    evidence |= {
        "last_run_id": run.id,
        "last_drill_at": drilled_at.isoformat(timespec="seconds"),
        "age_days": round(age_days, 1),
        "due_in_days": round(MAX_DRILL_AGE_DAYS - age_days, 1),
    }
    when = f"{drilled_at:%Y-%m-%d} ({age_days:.0f} days ago, run {run.id})"
    if age_days > MAX_DRILL_AGE_DAYS:
        return Outcome(
            Status.FAIL,
            f"last successful drill {when}: over {MAX_DRILL_AGE_DAYS} days",
            evidence,
            remediation=_REMEDIATION,
        )
    return Outcome(Status.PASS, f"last successful drill {when}", evidence)
