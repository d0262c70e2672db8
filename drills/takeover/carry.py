"""Scale DR to demand: the critical tier sized for ``target_percent`` of the primary's
demand at T0 (the last 5 minutes), never below ``dr_replicas``.

The takeover scales each measured critical service to its target with the tier, restores
the service once ``dr_replicas`` are ready (the RTO does not wait for the rest), and then
waits, beside the normal tier, until the target replicas are ready: ``carry_seconds`` is
that moment after T0. A DR that cannot reach the target still serves what it has; the run
records what percentage of the demand it carries, and a drill's verdict says the target was
not carried. A drill or practice grows a service no further than its preflight's
capacity.carry found room for, so the rest of the plan's minimum still comes up. Demand
that cannot be read leaves a service at ``dr_replicas`` and the carry unverified, never
assumed.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from drills.checks.areas.carry_sizing import carried_percent, replicas_needed
from drills.checks.areas.demand_query import demand_at
from drills.checks.runner import ReadinessReport
from drills.errors import DrillError, TargetError
from drills.plan import DrillPlan, Workload
from drills.takeover.timeline import Timeline, utc_now
from drills.targets.prometheus_api import prometheus_url
from drills.targets.sites import Targets


class PhaseContext(Protocol):
    """What of a takeover's phase context this needs (drills.takeover.steps.phases, which
    calls it, stays the only one to import the other)."""

    plan: DrillPlan
    targets: Targets
    timeline: Timeline
    tier_deadline_s: float
    facts: dict[str, Any]

    @property
    def dry_run(self) -> bool: ...


log = logging.getLogger("drills.takeover.carry")

POLL_S = 0.25
FACT = "carry"  # ctx.facts key of the CarryWatch
ROOM = "carry_room"  # ctx.facts key: the replicas DR can give each service (capacity.carry)
CARRY_CHECK = "capacity.carry"


@dataclass
class ServiceTarget:
    key: str
    workload: Workload
    demand: float | None  # at T0, in the plan's unit; None: it could not be read
    source: str  # "prometheus", "static" or why there is no figure
    replicas: int  # what the takeover scales it to
    needed: int | None  # what carries target_percent (None: demand unknown)
    reached: int = 0  # ready replicas when the wait ended
    # (epoch seconds, ready replicas) each time the ready count changed, and at the end:
    # the part of the demand DR carried over the run
    seen: list[tuple[float, int]] = field(default_factory=list)

    def observe(self, ready: int, *, last: bool = False) -> None:
        self.reached = ready
        if last or not self.seen or self.seen[-1][1] != ready:
            self.seen.append((time.time(), ready))

    def row(self, plan: DrillPlan) -> dict[str, Any]:
        spec = plan.demand[self.key]
        percent = (
            round(carried_percent(self.reached, self.demand, spec), 1)
            if self.demand is not None
            else None
        )
        over_time = [
            [round(at, 3), ready,
             None if self.demand is None else round(carried_percent(ready, self.demand, spec), 1)]
            for at, ready in self.seen
        ]  # fmt: skip
        return {
            "service": self.key, "demand": None if self.demand is None else round(self.demand, 4),
            "unit": str(spec.unit), "source": self.source, "target_percent": spec.target_percent,
            "needed": self.needed, "scaled_to": self.replicas, "reached": self.reached,
            "percent_carried": percent,
            "carried": percent is not None and percent + 1e-9 >= spec.target_percent,
            "over_time": over_time,  # [epoch seconds, ready replicas, percent carried]
        }  # fmt: skip


def room(report: ReadinessReport | None) -> dict[str, int]:
    """The replicas capacity.carry found DR can give each measured service, its GPUs
    counted after the rest of the takeover's dr_replicas: a rehearsal grows a service no
    further, so a DR short of the target still brings the plan's whole minimum up (grown
    past it, the critical tier's priority would take the normal tier's GPUs, and full
    capacity would wait out its deadline). Empty when the check did not count them."""
    result = next((r for r in report.results if r.id == CARRY_CHECK), None) if report else None
    out: dict[str, int] = {}
    for row in (result.evidence.get("services") or []) if result else []:
        per_replica = int(row.get("gpus_needed") or 0) // max(1, int(row["replicas_needed"]))
        if per_replica > 0 and isinstance(row.get("gpus_available"), int):
            out[str(row["service"])] = row["gpus_available"] // per_replica
    return out


def targets_at_t0(
    plan: DrillPlan, room_for: dict[str, int] | None = None
) -> dict[str, ServiceTarget]:
    """Each measured critical service's replicas for its demand at T0, within ``room_for``
    (the replicas DR can give it, where known)."""
    url = prometheus_url(plan)
    out: dict[str, ServiceTarget] = {}
    for w in plan.workloads_in("critical"):
        spec = plan.demand.get(w.key)
        if spec is None:
            continue
        demand, source = None, "no Prometheus given and no static figure"
        if spec.query is not None and url:
            try:
                demand, source = demand_at(url, spec.query, spec.resolution), "prometheus"
            except TargetError as exc:
                source = str(exc)
        if demand is None and spec.static is not None:
            demand, source = spec.static, f"static ({source})" if spec.query else "static"
        needed = replicas_needed(demand, spec) if demand is not None else None
        within = (room_for or {}).get(w.key, needed or 0)
        replicas = max(w.dr_replicas, min(needed or 0, within))
        out[w.key] = ServiceTarget(w.key, w, demand, source, replicas, needed)
    return out


@dataclass
class CarryWatch:
    """Waits in the background for the target replicas, from the critical tier's scale."""

    targets: dict[str, ServiceTarget]
    deadline: float  # time.monotonic()
    reached_at: dt.datetime | None = None
    _thread: threading.Thread | None = field(default=None, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    def start(self, ctx: PhaseContext) -> None:
        self._thread = threading.Thread(target=self._watch, args=(ctx,), daemon=True,
                                        name="carry-watch")  # fmt: skip
        self._thread.start()

    def _watch(self, ctx: PhaseContext) -> None:
        kube = ctx.targets.dr.kube
        while not self._stop.is_set():
            try:
                for t in self.targets.values():
                    obj = kube.workload(t.workload.namespace, str(t.workload.kind), t.workload.name)
                    t.observe(int(((obj or {}).get("status") or {}).get("readyReplicas") or 0))
            except (TargetError, DrillError) as exc:
                log.warning("carry: DR not read (%s); trying again", exc)
            else:
                # Done once all that was scaled is ready: a service held below its target
                # (no room, demand unknown) has nothing more to wait for, and never carried.
                if all(t.reached >= t.replicas for t in self.targets.values()):
                    if all(t.needed is not None and t.reached >= t.needed
                           for t in self.targets.values()):  # fmt: skip
                        self.reached_at = utc_now()
                    return
            if time.monotonic() >= self.deadline:
                return
            self._stop.wait(POLL_S)

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join(max(0.0, self.deadline - time.monotonic()) + 5)
            self._stop.set()
        for t in self.targets.values():  # the line of each service reaches the wait's end
            t.observe(t.reached, last=True)


def replicas_for(ctx: PhaseContext, w: Workload) -> int:
    """What the takeover scales a workload to at DR: its carry target where it has one."""
    watch = ctx.facts.get(FACT)
    if isinstance(watch, CarryWatch) and w.key in watch.targets:
        return watch.targets[w.key].replicas
    return w.dr_replicas


def size_critical(ctx: PhaseContext) -> None:
    """Before the critical tier is scaled: its carry targets, from the demand at T0."""
    if not ctx.plan.demand or FACT in ctx.facts:
        return
    targets = targets_at_t0(ctx.plan, ctx.facts.get(ROOM))
    if targets:
        ctx.facts[FACT] = CarryWatch(targets, time.monotonic() + ctx.tier_deadline_s)


def watch_carry(ctx: PhaseContext) -> None:
    """Once the critical tier serves: wait for the carry targets in the background."""
    watch = ctx.facts.get(FACT)
    if isinstance(watch, CarryWatch) and not ctx.dry_run:
        watch.start(ctx)


def finish_carry(ctx: PhaseContext) -> None:
    """With full capacity: the wait for the targets ends, and what DR carries is recorded."""
    watch = ctx.facts.get(FACT)
    if not isinstance(watch, CarryWatch) or ctx.dry_run:
        return
    with ctx.timeline.step("carry the primary's demand") as step:
        watch.join()
        rows = [t.row(ctx.plan) for t in watch.targets.values()]
        ctx.facts["capacity"] = capacity_block(rows)
        if watch.reached_at is not None:
            ctx.facts["carry_at"] = watch.reached_at
        step.evidence = dict(ctx.facts["capacity"])
        step.result = ctx.facts["capacity"]["summary"]


def capacity_block(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the report's ``capacity`` holds: per service needed, reached, percent carried."""
    carried = all(r["carried"] for r in rows)
    short = [r for r in rows if not r["carried"]]
    if carried:
        summary = "DR carries the target of " + ", ".join(
            f"{r['service']} ({r['percent_carried']:.3g}%)" for r in rows
        )
    else:
        summary = "target not carried: " + ", ".join(
            f"{r['service']} carries "
            + (
                "an unknown part"
                if r["percent_carried"] is None
                else f"{r['percent_carried']:.3g}%"
            )
            + f" of {r['target_percent']:g}% ({r['reached']}/{r['needed'] or '?'} replicas)"
            for r in short
        )
    ratios = [r["percent_carried"] / 100 for r in rows if r["percent_carried"] is not None]
    return {
        "services": rows,
        "carried": carried,
        "ratio": round(min(ratios), 4) if ratios and len(ratios) == len(rows) else None,
        "summary": summary,
    }
