"""The way home after an incident: a planned move from DR back to the primary.

Its phases, in the one order a failback may take: stop the DR writers (so nothing
writes at both sites), wait until every DR write is readable at the primary (the
final sync), bring the primary up tier by tier and reopen it, then switch DNS back.
After the switch: smoke through the name, and return DR to standby, verified from
outside to have stopped serving.

Every change goes through the executor, so it is journalled, and the target of
each is the state the incident found (its snapshot): the end state is the state
before the incident. Before the DNS switch, an undo (newest first) puts DR back to
serving exactly as it was; after it, a failback only goes forward.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from drills.checks.areas.wayback import behind, describe_behind, reverse_sync, running_writers
from drills.errors import DrillError, StepFailed
from drills.plan import Workload
from drills.plan.reverse import reversed_plan
from drills.store.details import DatasetCopiedBack
from drills.takeover.journal import Change
from drills.takeover.snapshot import Snapshot, fence_of, touched
from drills.takeover.steps.changes import record_address, workload_address
from drills.takeover.steps.executor import ChangeExecutor, PlannedChange
from drills.takeover.steps.phases import (
    POLL_S,
    PhaseContext,
    smoke,
    switch_dns,
    wait_endpoint,
    wait_until,
    waiting_pool,
)
from drills.takeover.timeline import Timeline, utc_now
from drills.targets.sites import Role, Targets

TIERS = ("critical", "normal", "batch")  # the primary comes back in this order, all of it


@dataclass
class FailbackContext(PhaseContext):
    goal: Snapshot = field(default_factory=dict)  # the state before the incident
    incident_t0: dt.datetime | None = None
    sync_deadline_s: float = 300.0

    @classmethod
    def of(cls, ctx: PhaseContext, **extra: Any) -> FailbackContext:
        """The failback's context over a run's phase context (sharing its facts)."""
        base = {f.name: getattr(ctx, f.name) for f in fields(PhaseContext)}
        return cls(**base, **extra)

    def wanted(self, address: str) -> dict[str, Any]:
        if address not in self.goal:
            raise DrillError(f"{address} is not in the state before the incident")
        return dict(self.goal[address])


def goal_from_journal(now: Snapshot, changes: list[Change]) -> Snapshot:
    """The state before an incident that kept no snapshot: the originals of its journal
    over the state ``now`` (what it did not change is taken as it stands).

    A target changed twice (an incident held, touched, then completed) keeps the original
    of its first change: a later one's is a state the incident itself made."""
    originals: Snapshot = {}
    for change in sorted(changes, key=lambda c: c.seq):
        originals.setdefault(change.target, change.original)
    return now | originals


def _wait(ctx: PhaseContext, role: Role, *, serving: bool, deadline_s: float) -> str:
    endpoint = str(getattr(ctx.plan.sites, role).endpoint)
    return wait_endpoint(endpoint, serving_wanted=serving, deadline_s=deadline_s)


# -- 1. stop the DR writers -------------------------------------------------------
def stop_dr_writers(ctx: FailbackContext) -> None:
    writers = ctx.plan.writers
    with ctx.timeline.step("stop DR writers") as step:
        for w in writers:
            address = workload_address("dr", str(w.kind), w.namespace, w.name)
            ctx.executor.apply("workload.scale", address, {"replicas": 0})
        ctx.facts.setdefault("writers_stopped_at", utc_now())  # T0 of the failback
        step.evidence = {"writers": [w.key for w in writers]}
        if ctx.dry_run:
            step.status = "planned"
            return
    with ctx.timeline.step("verify no DR writer running") as step:

        def stopped() -> tuple[bool, str]:
            running = running_writers(ctx.targets.dr.kube, writers)
            return not running, f"still running: {running}" if running else "none"

        step.result = wait_until("no DR writer running", stopped, ctx.fence_deadline_s)


# -- 2. the final sync --------------------------------------------------------------
def final_sync(ctx: FailbackContext) -> None:
    """Wait until every object at DR is readable at the primary (RPO 0), per dataset."""
    reverse = reversed_plan(ctx.plan)
    with ctx.timeline.step("every DR write readable at the primary") as step:
        if not reverse.datasets:
            step.result = "no datasets in the plan"
            return
        with Targets(reverse, reverse=True) as targets:

            def look() -> list[DatasetCopiedBack]:
                now = utc_now()
                return [
                    reverse_sync(targets, ds, since=ctx.incident_t0, now=now)
                    for ds in reverse.datasets
                ]

            rows = _sync(ctx, look)
        ctx.facts["datasets"] = rows
        step.evidence = {"datasets": [r.model_dump(mode="json") for r in rows]}
        step.result = f"{sum(r.written_at_dr for r in rows)} object(s) written at DR, all readable"
        if ctx.dry_run:
            step.status = "planned"
            step.result = describe_behind(behind(rows)) or "already in sync"


def _sync(
    ctx: FailbackContext, look: Callable[[], list[DatasetCopiedBack]]
) -> list[DatasetCopiedBack]:
    deadline = time.monotonic() + ctx.sync_deadline_s
    while True:
        rows = look()
        if ctx.dry_run or not behind(rows):
            return rows
        if time.monotonic() >= deadline:
            raise StepFailed(
                "final sync",
                f"not in sync after {ctx.sync_deadline_s:.0f}s: {describe_behind(behind(rows))}",
            )
        time.sleep(max(POLL_S, 0.5))


# -- 3. bring the primary up --------------------------------------------------------
def bring_up_primary(ctx: FailbackContext) -> None:
    for tier in TIERS:
        workloads = list(ctx.plan.workloads_in(tier))
        if workloads:
            _restore_tier(ctx, tier, workloads)
    with ctx.timeline.step("reopen primary ingress") as step:
        for kind, address in fence_of(ctx.plan, "primary"):
            ctx.executor.apply(kind, address, ctx.wanted(address))
        step.evidence = {"fence": [address for _, address in fence_of(ctx.plan, "primary")]}
        if ctx.dry_run:
            step.status = "planned"
            return
    with ctx.timeline.step("primary serves") as step:
        step.result = _wait(ctx, "primary", serving=True, deadline_s=ctx.tier_deadline_s)


def _restore_tier(ctx: FailbackContext, tier: str, workloads: list[Workload]) -> None:
    deadline = time.monotonic() + ctx.tier_deadline_s

    def one(w: Workload) -> None:
        address = workload_address("primary", str(w.kind), w.namespace, w.name)
        replicas = int(ctx.wanted(address)["replicas"])
        with ctx.timeline.step(f"primary {tier}: {w.key} → {replicas}") as step:
            ctx.executor.apply("workload.scale", address, {"replicas": replicas})
            step.evidence = {"replicas": replicas}
            if ctx.dry_run or replicas == 0:
                step.status = "planned" if ctx.dry_run else "ok"
                return
            left = max(0.0, deadline - time.monotonic())
            kube = ctx.targets.primary.kube
            final = kube.wait_ready(w.namespace, str(w.kind), w.name, replicas, left, stop)
            step.evidence["ready"] = (final.get("status") or {}).get("readyReplicas", 0)

    # A tier at once, as the takeover brings DR up: its time is the slowest workload's.
    with waiting_pool(min(16, len(workloads))) as (pool, stop):
        for future in [pool.submit(one, w) for w in workloads]:
            future.result()


# -- 4. switch DNS back --------------------------------------------------------------
def dns_address(ctx: PhaseContext) -> str:
    return record_address(ctx.plan.dns.record.name, str(ctx.plan.dns.record.type))


def switch_back(ctx: FailbackContext) -> None:
    switch_dns(ctx, ctx.wanted(dns_address(ctx))["values"][0])


# -- 5. after the switch: smoke, then DR back to standby --------------------------------
def smoke_primary(ctx: FailbackContext) -> dt.datetime:
    """The plan's smoke probes through the name, now answered by the primary. A probe's
    ``expect_body`` is the takeover's (it often names DR): here only its status counts,
    and the name itself was confirmed on every authoritative server just before."""
    probes = tuple(p.model_copy(update={"expect_body": None}) for p in ctx.plan.smoke)
    return smoke(
        dataclasses.replace(ctx, plan=ctx.plan.model_copy(update={"smoke": probes})), "primary"
    )


def dr_to_standby(ctx: FailbackContext) -> None:
    with ctx.timeline.step("return DR to standby") as step:
        addresses = [(k, a) for k, a in touched(ctx.plan) if a.startswith("dr/")]
        for kind, address in addresses:
            ctx.executor.apply(kind, address, ctx.wanted(address))
        step.evidence = {"addresses": [a for _, a in addresses]}
        if ctx.dry_run:
            step.status = "planned"
            return
    with ctx.timeline.step("verify DR not serving") as step:
        step.result = _wait(ctx, "dr", serving=False, deadline_s=ctx.tier_deadline_s)


@dataclass(frozen=True)
class FailbackPhase:
    name: str
    run: Callable[[FailbackContext], object]


# Before the DNS switch: undone on a failure or a cancel. The switch itself is last.
BEFORE_DNS: tuple[FailbackPhase, ...] = (
    FailbackPhase("stop DR writers", stop_dr_writers),
    FailbackPhase("final sync", final_sync),
    FailbackPhase("bring up primary", bring_up_primary),
)
DNS_BACK = FailbackPhase("dns back", switch_back)
# After it: only forward.
AFTER_DNS: tuple[FailbackPhase, ...] = (
    FailbackPhase("smoke", smoke_primary),
    FailbackPhase("DR to standby", dr_to_standby),
)
FAILBACK: tuple[FailbackPhase, ...] = (*BEFORE_DNS, DNS_BACK, *AFTER_DNS)


def list_failback(ctx: FailbackContext, phase_name: str) -> list[PlannedChange]:
    """Every change the failback would make, as current → intended, none of them made."""
    if not ctx.dry_run:
        raise DrillError("listing the failback's changes needs a dry-run executor")
    with ctx.timeline.phase(phase_name, dry=True):
        for phase in (*BEFORE_DNS, DNS_BACK):
            phase.run(ctx)
        for kind, address in touched(ctx.plan):
            if address.startswith("dr/"):
                ctx.executor.apply(kind, address, ctx.wanted(address))
    return list(ctx.executor.planned)


def dns_switched_back(changes: list[Change]) -> bool:
    """The failback reached its DNS switch (made, or possibly made): it goes forward now.

    A switch whose write failed and left the record as it was (FAILED) switched nothing:
    the failback is still before its switch, and is undone."""
    return any(c.kind == "dns.record" and c.needs_undo for c in changes)


def undo_before_dns(
    executor: ChangeExecutor, ctx: PhaseContext, timeline: Timeline
) -> list[Change]:
    """Back to serving from DR exactly as before the failback: undo its changes newest
    first (the primary closed again before the DR writers restart), then see from
    outside that the primary is fenced and DR serves."""
    with timeline.step("undo the failback, newest first") as step:
        undone = executor.rollback()
        step.evidence = {"undone": [c.target for c in undone]}
    with timeline.step("primary fenced again") as step:
        step.result = _wait(ctx, "primary", serving=False, deadline_s=ctx.fence_deadline_s)
    with timeline.step("DR still serves") as step:
        step.result = _wait(ctx, "dr", serving=True, deadline_s=ctx.tier_deadline_s)
    return undone


def complete_forward(ctx: FailbackContext) -> dt.datetime:
    """Walk the whole failback again (what is done is skipped) to its end; when restored."""
    for phase in (*BEFORE_DNS, DNS_BACK):
        phase.run(ctx)
    restored = smoke_primary(ctx)
    dr_to_standby(ctx)
    return restored


__all__ = [
    "AFTER_DNS",
    "BEFORE_DNS",
    "DNS_BACK",
    "FAILBACK",
    "FailbackContext",
    "FailbackPhase",
    "complete_forward",
    "dns_switched_back",
    "goal_from_journal",
    "list_failback",
    "undo_before_dns",
]
