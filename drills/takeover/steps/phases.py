"""The mutating phases of a takeover: fence the primary, bring DR up, switch DNS, smoke.

Each phase applies its changes through the executor (so they are journalled
and undoable) and then verifies from outside that they took. In a dry run the
executor only lists the changes and the waits are skipped.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from drills.errors import StepFailed, TargetError
from drills.plan import ControllerFence, DrillPlan, Workload
from drills.takeover.steps.changes import ingress_address, record_address, workload_address
from drills.takeover.steps.executor import ChangeExecutor
from drills.takeover.timeline import Timeline
from drills.targets.http import new_client
from drills.targets.probe import ProbeResult, serving, smoke_until
from drills.targets.sites import Targets

FENCED_CLASS = "drills-fenced"  # an IngressClass no controller serves
POLL_S = 0.05


@dataclass
class PhaseContext:
    plan: DrillPlan
    targets: Targets
    executor: ChangeExecutor
    timeline: Timeline
    force_unfenced: bool = False
    incident: bool = False
    tier_deadline_s: float = 600.0
    fence_deadline_s: float = 60.0
    dns_deadline_s: float = 120.0
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def dry_run(self) -> bool:
        return self.executor.dry_run


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def wait_until(what: str, test: Callable[[], tuple[bool, str]], deadline_s: float) -> str:
    """Poll ``test`` until it holds; raise StepFailed with its last word on the deadline."""
    deadline = time.monotonic() + deadline_s
    while True:
        ok, detail = test()
        if ok:
            return detail
        if time.monotonic() >= deadline:
            raise StepFailed(what, f"not true after {deadline_s:.0f}s: {detail}")
        time.sleep(POLL_S)


@contextmanager
def waiting_pool(workers: int) -> Iterator[tuple[ThreadPoolExecutor, threading.Event]]:
    """Threads that wait in parallel, told to stop as soon as the caller is interrupted.

    A cancel (SIGTERM, Ctrl-C) raises in the main thread only. Without the event, the
    pool's shutdown would sit out every other wait, up to a tier's deadline, before the
    rollback could start, and a scheduler kills a cancelled run after a grace period.
    """
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        yield pool, stop
    except BaseException:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def wait_endpoint(url: str, *, serving_wanted: bool, deadline_s: float) -> str:
    """Probe a site endpoint from outside until it is (or is no longer) serving."""
    want = "serves" if serving_wanted else "stops serving"
    with new_client(read_timeout=2.0) as client:

        def test() -> tuple[bool, str]:
            result: ProbeResult = serving(client, url)
            return result.ok == serving_wanted, f"{url} answered {result.status or result.detail}"

        return wait_until(f"{url} {want}", test, deadline_s)


# -- 3. fence the primary ---------------------------------------------------------
def fence_primary(ctx: PhaseContext) -> None:
    site = ctx.plan.sites.primary
    try:
        with ctx.timeline.step("close primary ingress") as step:
            if isinstance(site.ingress, ControllerFence):
                d = site.ingress.deployment
                address = workload_address("primary", "Deployment", d.namespace, d.name)
                before = ctx.executor.apply("workload.scale", address, {"replicas": 0})
            else:
                before = {}
                for obj in site.ingress.objects:
                    address = ingress_address("primary", obj.namespace, obj.name)
                    before[address] = ctx.executor.apply(
                        "ingress.class", address, {"ingressClassName": FENCED_CLASS}
                    )
            step.evidence = {"before": before}
        with ctx.timeline.step("stop primary writers") as step:
            for w in ctx.plan.writers:
                address = workload_address("primary", str(w.kind), w.namespace, w.name)
                ctx.executor.apply("workload.scale", address, {"replicas": 0})
            step.evidence = {"writers": [w.key for w in ctx.plan.writers]}
    except TargetError as exc:
        if not ctx.incident:
            raise
        _unfenced(ctx, exc)
        return
    if ctx.dry_run:
        return
    with ctx.timeline.step("verify primary fenced from outside") as step:
        detail = wait_endpoint(
            str(site.endpoint), serving_wanted=False, deadline_s=ctx.fence_deadline_s
        )
        wait_until("no primary writer pods", lambda: _writer_pods(ctx), ctx.fence_deadline_s)
        step.result = detail
        step.evidence = {"endpoint": str(site.endpoint), "writer_pods": 0}


def _unfenced(ctx: PhaseContext, cause: TargetError) -> None:
    """Incident mode with the primary unreachable: go on only if a person said so."""
    with ctx.timeline.step("primary unreachable") as step:
        step.evidence = {"cause": str(cause)}
        if not ctx.force_unfenced:
            step.result = "refused to continue unfenced"
            raise StepFailed(
                "fence primary",
                f"the primary is unreachable ({cause}); it may still serve writes. "
                "Continue only with --force-unfenced (or the dashboard's checkbox).",
            )
        step.result = "continuing UNFENCED on explicit confirmation"
        ctx.facts["unfenced"] = True


def _writer_pods(ctx: PhaseContext) -> tuple[bool, str]:
    kube = ctx.targets.primary.kube
    remaining = {}
    for w in ctx.plan.writers:
        obj = kube.workload(w.namespace, str(w.kind), w.name) or {}
        labels = obj.get("spec", {}).get("selector", {}).get("matchLabels", {})
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        count = len(kube.pods(w.namespace, selector)) if selector else 0
        if count:
            remaining[w.key] = count
    return not remaining, f"writer pods remaining: {remaining}" if remaining else "none"


# -- 4. bring up DR ---------------------------------------------------------------
def bring_up(ctx: PhaseContext) -> None:
    for tier in ("critical", "normal"):
        workloads = [w for w in ctx.plan.workloads_in(tier) if w.dr_replicas > 0]
        if workloads:
            _bring_up_tier(ctx, tier, workloads)
    with ctx.timeline.step("batch tier stays paused") as step:
        step.evidence = {"paused": [w.key for w in ctx.plan.workloads_in("batch")]}
        step.status = "skipped"


def _bring_up_tier(ctx: PhaseContext, tier: str, workloads: list[Workload]) -> None:
    deadline = time.monotonic() + ctx.tier_deadline_s

    def one(w: Workload) -> None:
        with ctx.timeline.step(f"{tier}: {w.key} → {w.dr_replicas}") as step:
            address = workload_address("dr", str(w.kind), w.namespace, w.name)
            before = ctx.executor.apply("workload.scale", address, {"replicas": w.dr_replicas})
            step.evidence = {"before": before.get("replicas"), "replicas": w.dr_replicas}
            if ctx.dry_run:
                step.status = "planned"
                return
            left = max(0.0, deadline - time.monotonic())
            kube = ctx.targets.dr.kube
            final = kube.wait_ready(w.namespace, str(w.kind), w.name, w.dr_replicas, left, stop)
            step.evidence["ready"] = (final.get("status") or {}).get("readyReplicas", 0)

    # The whole tier at once: its RTO is the slowest workload, not the sum.
    with waiting_pool(min(16, len(workloads))) as (pool, stop):
        for future in [pool.submit(one, w) for w in workloads]:
            future.result()


# -- 5. switch DNS ----------------------------------------------------------------
def switch_dns(ctx: PhaseContext) -> None:
    dns = ctx.plan.dns
    name, rtype = dns.record.name, str(dns.record.type)
    with ctx.timeline.step(f"switch {name} {rtype} → {dns.dr_value}") as step:
        answers = ctx.targets.dns.read(name, rtype)
        ttl = max(a.ttl or 0 for a in answers)
        # Already at DR (a resumed takeover): no change, so no serial will move.
        already = all(list(a.values) == [dns.dr_value] for a in answers)
        serials = [a.serial for a in answers if a.serial is not None and not already]
        ctx.facts["old_ttl"] = ttl
        ctx.executor.apply(
            "dns.record", record_address(name, rtype), {"values": [dns.dr_value], "ttl": ttl}
        )
        step.evidence = {"ttl": ttl, "before": sorted({v for a in answers for v in a.values})}
        if ctx.dry_run:
            step.status = "planned"
            return
    with ctx.timeline.step("confirm on every authoritative server") as step:
        confirmed = ctx.targets.dns.confirm(
            name,
            rtype,
            dns.dr_value,
            previous_serial=max(serials) if serials else None,
            deadline_s=ctx.dns_deadline_s,
        )
        ctx.facts["dns_switched_at"] = _now()
        step.evidence = {"servers": [a.server for a in confirmed], "ttl": ttl}


# -- 6. smoke ---------------------------------------------------------------------
def smoke(ctx: PhaseContext) -> dt.datetime:
    """Probe the service by its DNS name until it answers; returns when it did."""
    probes = ctx.plan.smoke
    if not probes:
        with ctx.timeline.step("DR endpoint serves") as step:
            step.result = wait_endpoint(
                str(ctx.plan.sites.dr.endpoint), serving_wanted=True, deadline_s=ctx.tier_deadline_s
            )
        return _now()
    with waiting_pool(len(probes)) as (pool, stop):
        results = list(pool.map(lambda p: smoke_until(p, ctx.targets.dns, stop=stop), probes))
    restored = _now()
    for probe, result in zip(probes, results, strict=True):
        with ctx.timeline.step(f"smoke {probe.name}") as step:
            step.evidence = {"url": str(probe.url), "address": result.address,
                             "status": result.status, "body": result.detail}  # fmt: skip
            if not result.ok:
                raise StepFailed(f"smoke {probe.name}", f"{probe.url}: {result.detail}")
    return restored
