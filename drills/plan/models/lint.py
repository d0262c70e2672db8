"""Warnings: plans that validate, and can run, but whose settings defeat their own purpose.

What can harm (a drill with nothing behind the switch, a schedule that fences the
primary every minute) is an error in the models. What only makes the drill prove
less (a TTL longer than the RTO, an RPO longer than the time between drills) is
a warning here: `drills plan validate` prints it, and readiness can report it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol

from drills.errors import located
from drills.plan import cron
from drills.plan.durations import format_duration
from drills.plan.models.datasets import Dataset
from drills.plan.models.demand import Demands, demand_findings
from drills.plan.models.dns_switch import DnsSwitch
from drills.plan.models.objectives import Objectives, Schedule
from drills.plan.models.workloads import Workload

Loc = tuple[str | int, ...]


class LintedPlan(Protocol):
    """The sections of a drill plan the warnings read. (The plan names this module's
    warnings, so this module names only its sections.)"""

    @property
    def dns(self) -> DnsSwitch: ...
    @property
    def objectives(self) -> Objectives: ...
    @property
    def schedule(self) -> Schedule | None: ...
    @property
    def datasets(self) -> tuple[Dataset, ...]: ...
    @property
    def workloads(self) -> tuple[Workload, ...]: ...
    @property
    def demand(self) -> Demands: ...


# The readiness check drill.cadence fails when the last successful drill is older than
# this (drills/checks/areas/cadence.py); a schedule with longer gaps makes it fail by design.
MAX_DRILL_GAP = dt.timedelta(days=92)
DAILY = dt.timedelta(days=1)


@dataclass(frozen=True)
class PlanWarning:
    """One warning about a valid plan, located like a :class:`drills.errors.PlanProblem`."""

    code: str  # stable, for tools: "ttl-exceeds-rto", "rpo-exceeds-cadence"...
    file: str
    line: int | None
    column: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = located(self.file, self.line, self.column)
        return f"{where}: {self.path}: warning: {self.message}"


Finding = tuple[Loc, str, str]  # (field location, code, message)


def findings(plan: LintedPlan) -> list[Finding]:
    """Every warning about ``plan``, unlocated."""
    return [*_ttl(plan), *_schedule(plan), *demand_findings(plan.demand, plan.workloads)]


def _ttl(plan: LintedPlan) -> list[Finding]:
    ttl, rto = plan.dns.max_ttl, plan.objectives.rto
    if ttl < rto:
        return []
    message = (
        f"max_ttl {format_duration(ttl)} is not shorter than the RTO {format_duration(rto)}: "
        "clients may keep the fenced primary's address for longer than the whole objective"
    )
    return [(("dns", "max_ttl"), "ttl-exceeds-rto", message)]


def _schedule(plan: LintedPlan) -> list[Finding]:
    if plan.schedule is None:
        return []
    timing = cron.cadence(plan.schedule.cron)
    found: list[Finding] = []
    where: Loc = ("schedule", "cron")
    if timing.shortest is not None and timing.shortest < DAILY:
        found.append(
            (
                where,
                "schedule-too-frequent",
                f"fires every {_span(timing.shortest)}; each drill fences the primary and "
                "fails over, so drills are usually weekly to quarterly",
            )
        )
    longest = timing.longest
    if longest is None or longest > MAX_DRILL_GAP:
        gap = f"up to {_span(longest)}" if longest else "years"
        found.append(
            (
                where,
                "schedule-too-rare",
                f"leaves {gap} between drills; the readiness check drill.cadence fails once "
                f"the last drill is older than {MAX_DRILL_GAP.days} days",
            )
        )
    if longest is not None:
        found += _rpo_over(plan, longest)
    return found


def _rpo_over(plan: LintedPlan, gap: dt.timedelta) -> list[Finding]:
    targets: list[tuple[Loc, float]] = [(("objectives", "rpo"), plan.objectives.rpo)]
    targets += [(("datasets", i, "rpo_target"), d.rpo_target) for i, d in enumerate(plan.datasets)]
    return [
        (
            loc,
            "rpo-exceeds-cadence",
            f"an RPO of {format_duration(seconds)} is longer than the {_span(gap)} between "
            "scheduled drills: it accepts losing more than a drill interval of data; "
            "is the unit right?",
        )
        for loc, seconds in targets
        if seconds > gap.total_seconds()
    ]


def _span(delta: dt.timedelta) -> str:
    return format_duration(delta.total_seconds())
