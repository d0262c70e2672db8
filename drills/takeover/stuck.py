"""An incident whose deadline passed with the takeover part-way: held, announced, retried.

An incident exists to restore service, so it never stops silently where no site may serve
(the primary fenced, DNS still at it). It holds the state as it stands (nothing is undone,
the primary stays fenced), looks from outside at what serves, records that on the run
(``details.stuck``) and tells every notifier (``incident.stuck``) with the one command that
continues it. The run stays unfinished. When what stopped it may pass by itself (a deadline
passed) it is no run "left for a person": the recover-orphans scan (drills.takeover.orphans)
retries its completion every minute until it is done. A person may continue it at once, or
keep it held with ``--hold``; one stopped by a refusal waits for a person to fix the cause.
"""

from __future__ import annotations

import logging

from drills.errors import TemporaryError
from drills.notify.runs import announce_stuck
from drills.plan import DrillPlan
from drills.store.details import StuckRecord
from drills.store.models import DrillRun
from drills.takeover.status import LiveView, look_live
from drills.takeover.steps.phases import DeadlinePassed
from drills.takeover.timeline import utc_now
from drills.targets.kube import NotReadyInTime

log = logging.getLogger("drills.takeover.stuck")

NAMES = {"primary": "the primary", "dr": "DR"}


def continue_command(run_id: str) -> str:
    return f"drills recover {run_id} --complete"


def state_words(plan: DrillPlan, live: LiveView) -> tuple[str, bool]:
    """What serves, in words an operator acts on, and whether users reach a serving site."""
    sites = ", ".join(
        f"{NAMES[role]} {'serves (HTTP 200)' if ok else 'does not serve'}"
        for role, ok in live.endpoints.items()
    )
    record = f"{plan.dns.record.name} {plan.dns.record.type}"
    values = ", ".join(live.dns_values) or "nothing"
    if live.dns in NAMES:
        dns = f"DNS {record} answers {values} ({NAMES[live.dns]})"
    else:
        dns = f"DNS {record}: {live.dns} ({live.error or values})"
    serving = live.dns in NAMES and bool(live.endpoints.get(live.dns))
    verdict = f"users reach {NAMES[live.dns]}" if serving else "NO SITE SERVING"
    return f"{sites}; {dns}: {verdict}", serving


def transient(exc: BaseException) -> bool:
    """Whether what stopped the run may pass by itself: a deadline that passed, a target
    that still failed for now at it; not a refusal (a rejected key, a missing object)."""
    return isinstance(exc, (TemporaryError, NotReadyInTime, DeadlinePassed))


def hold_stuck(
    plan: DrillPlan, run_id: str, error: str, *, auto_retry: bool = True, retried: bool = False
) -> StuckRecord:
    """Look at what serves now, and tell every notifier the incident is held part-way
    (``retried``: still, after recover-orphans tried to complete it)."""
    live = look_live(plan)
    state, serving = state_words(plan, live)
    stuck = StuckRecord(
        at=utc_now(), error=error, state=state, serving=serving, dns=live.dns,
        dns_values=list(live.dns_values), endpoints=dict(live.endpoints),
        command=continue_command(run_id), auto_retry=auto_retry,
    )  # fmt: skip
    log.error("incident %s stuck, held: %s; `%s` continues it", run_id, state, stuck.command)
    announce_stuck(plan, run_id, stuck, retried=retried)
    return stuck


def is_stuck(run: DrillRun) -> bool:
    """An incident held part-way on a deadline, that no recover has completed yet: what
    recover-orphans retries."""
    stuck = run.details.stuck
    return (
        stuck is not None
        and stuck.auto_retry
        and stuck.completed_at is None
        and run.finished_at is None
    )
