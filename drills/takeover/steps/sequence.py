"""The takeover, assembled once: a minimum takeover, service first, full capacity after.

Fence the primary; bring DR's critical tier up; switch DNS as soon as it is ready; smoke
through the name (the service is restored: the RTO); only then the normal tier (full
capacity); the batch tier stays paused. A drill walks it phase by phase. A dry run, and
the preview an operator confirms, walk it with an executor that only lists each change as
current → intended. `drills recover` walks it again over what a crashed incident left.
None of them can leave a phase out or take the phases in another order: DR is never
promoted before the primary is fenced, nor the normal tier before the service is restored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from drills.errors import DrillError
from drills.takeover.steps.executor import PlannedChange
from drills.takeover.steps.fence import fence_primary
from drills.takeover.steps.phases import (
    PhaseContext,
    bring_up_critical,
    bring_up_normal,
    smoke,
    switch_dns,
)
from drills.targets.dns import normalize_value


@dataclass(frozen=True)
class TakeoverPhase:
    name: str
    run: Callable[[PhaseContext], None]
    # How a takeover resumed after a crash runs it, where that differs: an effect the
    # crashed run already had must not be waited for again.
    resumed: Callable[[PhaseContext], None] | None = None
    # Smoke changes nothing and has nothing to wait for in a dry run: the list of changes
    # leaves it out.
    changes: bool = True

    def resume(self, ctx: PhaseContext) -> None:
        (self.resumed or self.run)(ctx)


def _dns_switched(ctx: PhaseContext) -> bool:
    dns = ctx.plan.dns
    answers = ctx.targets.dns.read(dns.record.name, str(dns.record.type))
    wanted = [normalize_value(str(dns.record.type), dns.dr_value)]
    return bool(answers) and all(list(a.values) == wanted for a in answers)


def _switch_dns_unless_switched(ctx: PhaseContext) -> None:
    # The switch waits for the zone serial to move; a switch already made never moves it.
    if not _dns_switched(ctx):
        switch_dns(ctx)
        return
    with ctx.timeline.step("DNS already answers DR on every server") as step:
        step.status = "skipped"


def _smoke(ctx: PhaseContext) -> None:
    ctx.facts["restored_at"] = smoke(ctx)


FENCE = TakeoverPhase("fence", fence_primary)
TAKEOVER: tuple[TakeoverPhase, ...] = (
    FENCE,
    TakeoverPhase("bring-up", bring_up_critical),
    TakeoverPhase("dns", switch_dns, resumed=_switch_dns_unless_switched),
    TakeoverPhase("smoke", _smoke, changes=False),
    TakeoverPhase("full-capacity", bring_up_normal),
)


def list_changes(ctx: PhaseContext, phase_name: str) -> list[PlannedChange]:
    """Every change the takeover would make, as current → intended, none of them made."""
    if not ctx.dry_run:
        raise DrillError("listing the takeover's changes needs a dry-run executor")
    with ctx.timeline.phase(phase_name, dry=True):
        for phase in TAKEOVER:
            if phase.changes:
                phase.run(ctx)
    return list(ctx.executor.planned)


def resume(ctx: PhaseContext, *, complete: bool) -> None:
    """Take over again after a crash; the executor skips what is already so.

    ``complete`` finishes the takeover in its one order: smoke-tested before the normal
    tier comes up. Otherwise only the fence is made sure of, so that DR, as it is, can
    never serve alongside the primary.
    """
    for phase in TAKEOVER if complete else (FENCE,):
        phase.resume(ctx)


__all__ = ["FENCE", "TAKEOVER", "TakeoverPhase", "list_changes", "resume"]
