"""The phases of a takeover: fence the primary, bring DR's critical tier up, switch DNS,
smoke, then the normal tier.

Each phase applies its changes through the executor (so they are journalled
and undoable) and then verifies from outside that they took. In a dry run the
executor only lists the changes and the waits are skipped.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from drills.checks.areas.identity import distinct_result
from drills.checks.areas.wayback import running_writers
from drills.checks.base import Status
from drills.checks.runner import ReadinessReport
from drills.errors import RunRefused, StepFailed, TargetError, TemporaryError
from drills.plan import ControllerFence, DrillPlan, Workload
from drills.takeover import carry
from drills.takeover.steps import preemption
from drills.takeover.steps.changes import (
    ingress_address,
    record_address,
    workload_address,
)
from drills.takeover.steps.dns_values import check_switch, record_where_planned
from drills.takeover.steps.executor import ChangeExecutor
from drills.takeover.steps.images import check_remapped_images
from drills.takeover.timeline import StepRecord, Timeline, every, utc_now
from drills.targets.http import new_client
from drills.targets.probe import ProbeResult, serving, smoke_until
from drills.targets.retry import Waiting, retry_until
from drills.targets.sites import Role, Targets

log = logging.getLogger("drills.takeover.steps")
T = TypeVar("T")

FENCED_CLASS = "drills-fenced"  # an IngressClass no controller serves
POLL_S = 0.05
PROBE_READ_S = 2.0
# "Stopped" is what several probes in a row saw: one lost answer is not a fenced site.
STOPPED_PROBES = 3
# How long the preflight looks for an endpoint's answer: long enough to ride out a blip.
SIGHT_WINDOW_S = 5.0
SIGHT_POLL_S = 0.2


class DeadlinePassed(StepFailed):
    """A phase waited for something until its deadline, in vain: what it waited for may
    still come (a retry later may pass), unlike a refusal."""


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


def shown_waits(timeline: Timeline, step: StepRecord) -> Callable[[Waiting], None]:
    """How a step tells of each wait on a target that does not answer: in the run's log,
    and live in its timeline (the CLI's table, the dashboard)."""

    due = every()

    def show(waiting: Waiting) -> None:
        text = waiting.describe()
        if due(step):
            log.warning("%s: %s", step.name, text)
        timeline.waiting(step, text)

    return show


def persist(
    ctx: PhaseContext,
    step: StepRecord,
    call: Callable[[], T],
    deadline: float,
    stop: threading.Event | None = None,
) -> T:
    """``call()``, its temporary failures retried until ``deadline`` (the phase's own, as
    ``time.monotonic()``), each wait shown: a blip costs a wait, never the phase."""
    return retry_until(call, deadline=deadline, on_wait=shown_waits(ctx.timeline, step), stop=stop)


def wait_until(what: str, test: Callable[[], tuple[bool, str]], deadline_s: float) -> str:
    """Poll ``test`` until it holds; raise StepFailed with its last word on the deadline.

    A target that fails for now (a timeout, a 503) is one more "not yet", never the end.
    """
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            ok, detail = test()
        except TemporaryError as exc:
            ok, detail = False, str(exc)
        if ok:
            return detail
        if time.monotonic() >= deadline:
            raise DeadlinePassed(what, f"not true after {deadline_s:.0f}s: {detail}")
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
    """Probe a site endpoint from outside until it is (or is no longer) serving.

    "No longer serving" must hold on several probes in a row: one lost answer is not
    a stopped site. A refused or hung connection counts as stopped, so call this only
    for an endpoint seen answering before (the preflight makes sure of both sites'):
    the silence of one that never answered proves nothing.
    """
    if serving_wanted:
        return _wait_probe(url, "serves", lambda r: r.ok, needed=1, deadline_s=deadline_s)
    return _wait_probe(
        url, "stops serving", lambda r: not r.ok, needed=STOPPED_PROBES, deadline_s=deadline_s
    )


def _wait_probe(
    url: str, want: str, holds: Callable[[ProbeResult], bool], *, needed: int, deadline_s: float
) -> str:
    with new_client(read_timeout=PROBE_READ_S) as client:
        streak = 0

        def test() -> tuple[bool, str]:
            nonlocal streak
            result = serving(client, url)
            streak = streak + 1 if holds(result) else 0
            return streak >= needed, f"{url} answered {result.describe()}"

        return wait_until(f"{url} {want}", test, deadline_s)


def look(
    url: str,
    *,
    serving_wanted: bool,
    window_s: float = SIGHT_WINDOW_S,
    stop: threading.Event | None = None,
) -> ProbeResult:
    """Look at an endpoint from outside for a while: until it serves (or, without
    ``serving_wanted``, answers at all), the window ends or ``stop`` is set; the last
    probe's result either way."""
    deadline = time.monotonic() + window_s
    stopped = stop or threading.Event()
    with new_client(read_timeout=PROBE_READ_S) as client:
        while True:
            result = serving(client, url)
            if (result.ok if serving_wanted else result.answered) or time.monotonic() >= deadline:
                return result
            if stopped.wait(SIGHT_POLL_S):
                return result


# -- 0. preflight: what must be seen before anything changes ------------------------
def preflight_guard(ctx: PhaseContext, readiness: ReadinessReport | None) -> None:
    """Refuse, before the first change, a takeover whose safety nothing could show.

    Raises RunRefused for two sites that are one (in every mode: a takeover onto itself
    is never right), and for a fence that could not be verified from outside: in a
    drill, a primary not seen serving or a DR endpoint not seen answering (or seen already
    serving), and a DNS record that could not be switched back; in an
    incident, a primary that does not answer at all, unless --force-unfenced. In both, a
    DNS record at an address the plan does not name (drills/takeover/steps/dns_values.py).
    In a drill, DR workloads that do not run the names images.remap gives the primary's
    images (drills/takeover/steps/images.py).
    """
    with ctx.timeline.step("primary and DR are distinct") as step:
        checked = distinct_result(readiness)
        step.result = f"{checked.status}: {checked.summary}" if checked else "not checked"
        if checked is not None and checked.status is Status.FAIL:
            step.evidence = dict(checked.evidence)
            why = f"{checked.summary}. {checked.remediation}"
            raise RunRefused(f"preflight: refused in every mode: {why}")
    with ctx.timeline.step("site endpoints seen from outside") as step:
        seen = _look_at_sites(ctx)
        step.evidence = {
            role: {"url": url, "answer": r.describe()} for role, (url, r) in seen.items()
        }
        problems = _sighting_problems(ctx, seen)
        if problems:
            step.result = "refused"
            raise RunRefused("preflight: " + " ".join(problems))
        step.result = _sighting_summary(ctx, seen["primary"][1])
    record_where_planned(ctx.plan, ctx.timeline, incident=ctx.incident)
    check_remapped_images(ctx.plan, ctx.targets, ctx.timeline, incident=ctx.incident)


def _look_at_sites(ctx: PhaseContext) -> dict[str, tuple[str, ProbeResult]]:
    drill = not ctx.incident
    wanted = {"primary": drill, "dr": False}  # a drill needs the primary serving; DR answering
    urls = {role: str(site.endpoint) for role, site in ctx.plan.sites.items()}
    with waiting_pool(2) as (pool, stop):
        futures = {r: pool.submit(look, urls[r], serving_wanted=wanted[r], stop=stop) for r in urls}
        seen = {r: (urls[r], f.result()) for r, f in futures.items()}
    ctx.facts["primary_seen"] = seen["primary"][1]
    return seen


def _sighting_problems(ctx: PhaseContext, seen: dict[str, tuple[str, ProbeResult]]) -> list[str]:
    (p_url, p), (d_url, d) = seen["primary"], seen["dr"]
    if ctx.incident:
        if p.answered or ctx.force_unfenced:
            return []
        return [
            f"the primary endpoint {p_url} does not answer ({p.detail}): it may still serve "
            "users and take writes, and nothing here can verify a fence of it. Take over "
            "anyway only with --force-unfenced; the report will say the primary was not fenced."
        ]
    problems = []
    if not p.ok:
        problems.append(
            f"the primary endpoint {p_url} does not serve ({p.describe()}): a drill must see "
            "the primary serve before it fences it, or the fence proves nothing. Fix "
            "sites.primary.endpoint, or the path from here to it."
        )
    if not d.answered:
        problems.append(
            f"the DR endpoint {d_url} does not answer ({d.detail}): nothing could verify from "
            "outside that DR stops serving at failback. Fix sites.dr.endpoint, or the path "
            "from here to it."
        )
    elif d.ok:
        problems.append(
            f"the DR endpoint {d_url} already serves ({d.describe()}): failback could never "
            "see DR stop serving, and both sites would serve during the drill. Stand DR by "
            "first, or fix sites.dr.endpoint."
        )
    return problems


def _sighting_summary(ctx: PhaseContext, primary: ProbeResult) -> str:
    if primary.answered:
        return f"primary answered {primary.describe()}"
    ctx.facts["unfenced"] = True
    return f"primary silent ({primary.detail}): continuing UNFENCED as forced (--force-unfenced)"


# -- 3. fence the primary ---------------------------------------------------------
def fence_primary(ctx: PhaseContext) -> None:
    site = ctx.plan.sites.primary
    url = str(site.endpoint)
    # What the fence will be verified against: the preflight's sighting, or (a takeover
    # resumed by `drills recover`) a look now, before any change.
    seen = None if ctx.dry_run else ctx.facts.get("primary_seen") or _look_before_fence(ctx, url)
    if seen is not None and not seen.answered:
        _unfenced(ctx, f"its endpoint {url} does not answer ({seen.detail})")
    # A primary seen answering is fenced within the fence's deadline, its blips retried; one
    # that never answered (an incident forced unfenced) is tried once, not waited for.
    answered = seen is not None and seen.answered
    deadline = time.monotonic() + (ctx.fence_deadline_s if answered else 0.0)
    try:
        _close_primary(ctx, deadline)
    except TargetError as exc:
        if not ctx.incident:
            raise
        _unfenced(ctx, str(exc))
        return
    if seen is None:  # a dry run
        return
    with ctx.timeline.step("verify primary fenced from outside") as step:
        if seen.answered:
            detail = wait_endpoint(url, serving_wanted=False, deadline_s=ctx.fence_deadline_s)
        else:
            detail = f"UNVERIFIED: {url} never answered here; continuing unfenced as forced"
        wait_until("no primary writer pods", lambda: _writer_pods(ctx), ctx.fence_deadline_s)
        step.result = detail
        step.evidence = {"endpoint": url, "seen_before": seen.describe(), "writer_pods": 0}


def _look_before_fence(ctx: PhaseContext, url: str) -> ProbeResult:
    with ctx.timeline.step("primary endpoint seen from outside") as step:
        seen = look(url, serving_wanted=False)
        step.result = seen.describe()
        ctx.facts["primary_seen"] = seen
        return seen


def _close_primary(ctx: PhaseContext, deadline: float) -> None:
    site = ctx.plan.sites.primary

    def apply(step: StepRecord, kind: str, address: str, intended: dict[str, Any]) -> Any:
        return persist(ctx, step, lambda: ctx.executor.apply(kind, address, intended), deadline)

    with ctx.timeline.step("close primary ingress") as step:
        if isinstance(site.ingress, ControllerFence):
            d = site.ingress.deployment
            address = workload_address("primary", "Deployment", d.namespace, d.name)
            before = apply(step, "workload.scale", address, {"replicas": 0})
        else:
            before = {}
            for obj in site.ingress.objects:
                address = ingress_address("primary", obj.namespace, obj.name)
                before[address] = apply(
                    step, "ingress.class", address, {"ingressClassName": FENCED_CLASS}
                )
        step.evidence = {"before": before}
    with ctx.timeline.step("stop primary writers") as step:
        for w in ctx.plan.writers:
            address = workload_address("primary", str(w.kind), w.namespace, w.name)
            apply(step, "workload.scale", address, {"replicas": 0})
        step.evidence = {"writers": [w.key for w in ctx.plan.writers]}


def _unfenced(ctx: PhaseContext, cause: str) -> None:
    """The primary cannot be fenced, or its fence seen: go on only if a person said so.

    A drill never goes on; an incident only with --force-unfenced.
    """
    with ctx.timeline.step("primary unreachable") as step:
        step.evidence = {"cause": cause}
        if ctx.incident and ctx.force_unfenced:
            step.result = "continuing UNFENCED on explicit confirmation"
            ctx.facts["unfenced"] = True
            return
        step.result = "refused to continue unfenced"
        raise StepFailed(
            "fence primary",
            f"the primary is unreachable ({cause}); it may still serve writes. "
            + (
                "Continue only with --force-unfenced (or the dashboard's checkbox)."
                if ctx.incident
                else "A drill never goes on without a verified fence."
            ),
        )


def _writer_pods(ctx: PhaseContext) -> tuple[bool, str]:
    remaining = running_writers(ctx.targets.primary.kube, ctx.plan.writers)
    return not remaining, f"writers still running: {remaining}" if remaining else "none"


# -- 4. bring up DR: the critical tier first, the normal tier once DR serves ------------
def bring_up_critical(ctx: PhaseContext) -> None:
    """The least DR needs to serve: the critical tier, ready, before DNS moves to it.
    Measured services are scaled to carry the primary's demand at T0 (drills.takeover.carry);
    the service is restored at their dr_replicas, the rest is waited for beside."""
    carry.size_critical(ctx)
    with preemption.watched(ctx):
        _bring_up(ctx, "critical")
    carry.watch_carry(ctx)


def bring_up_normal(ctx: PhaseContext) -> None:
    """After the service is restored: the normal tier (it waits, so that the critical tier
    had DR's GPUs first), then the batch tier left paused. Full capacity once ready."""
    _bring_up(ctx, "normal")
    if not ctx.dry_run:
        ctx.facts["full_capacity_at"] = utc_now()
    carry.finish_carry(ctx)
    with ctx.timeline.step("batch tier stays paused") as step:
        step.evidence = {"paused": [w.key for w in ctx.plan.workloads_in("batch")]}
        step.status = "skipped"


def _bring_up(ctx: PhaseContext, tier: str) -> None:
    workloads = [w for w in ctx.plan.workloads_in(tier) if w.dr_replicas > 0]
    if workloads:
        _bring_up_tier(ctx, tier, workloads)


def _bring_up_tier(ctx: PhaseContext, tier: str, workloads: list[Workload]) -> None:
    deadline = time.monotonic() + ctx.tier_deadline_s

    def one(w: Workload) -> None:
        replicas = carry.replicas_for(ctx, w)
        with ctx.timeline.step(f"{tier}: {w.key} → {replicas}") as step:
            address = workload_address("dr", str(w.kind), w.namespace, w.name)
            intended = {"replicas": replicas}
            before = persist(
                ctx, step, lambda: ctx.executor.apply("workload.scale", address, intended),
                deadline, stop,
            )  # fmt: skip
            step.evidence = {"before": before.get("replicas"), "replicas": replicas}
            if ctx.dry_run:
                step.status = "planned"
                return
            kube = ctx.targets.dr.kube

            def ready() -> dict[str, Any]:
                left = max(0.0, deadline - time.monotonic())
                return kube.wait_ready(w.namespace, str(w.kind), w.name, w.dr_replicas, left, stop)

            final = persist(ctx, step, ready, deadline, stop)
            step.evidence["ready"] = (final.get("status") or {}).get("readyReplicas", 0)

    # The whole tier at once: its RTO is the slowest workload, not the sum.
    with waiting_pool(min(16, len(workloads))) as (pool, stop):
        for future in [pool.submit(one, w) for w in workloads]:
            future.result()


# -- 5. switch DNS ----------------------------------------------------------------
def switch_dns(ctx: PhaseContext, value: str | None = None) -> None:
    """Switch the record to ``value`` (DR's by default; a failback gives the primary's)
    and confirm it on every authoritative server."""
    dns = ctx.plan.dns
    value = value or dns.dr_value
    name, rtype = dns.record.name, str(dns.record.type)
    # One deadline for the switch and its confirmation; a DNS server that does not answer
    # for a while inside it is waited for.
    deadline = time.monotonic() + ctx.dns_deadline_s
    with ctx.timeline.step(f"switch {name} {rtype} → {value}") as step:
        answers = persist(ctx, step, lambda: ctx.targets.dns.read(name, rtype), deadline)
        check_switch(ctx.plan, answers, value)  # what it holds now is what a rollback restores
        ttl = max(a.ttl or 0 for a in answers)
        # Already at DR (a resumed takeover): no change, so no serial will move.
        already = all(list(a.values) == [value] for a in answers)
        serials = [a.serial for a in answers if a.serial is not None and not already]
        ctx.facts["old_ttl"] = ttl
        intended = {"values": [value], "ttl": ttl}
        address = record_address(name, rtype)
        persist(ctx, step, lambda: ctx.executor.apply("dns.record", address, intended), deadline)
        step.evidence = {"ttl": ttl, "before": sorted({v for a in answers for v in a.values})}
        if ctx.dry_run:
            step.status = "planned"
            return
    with ctx.timeline.step("confirm on every authoritative server") as step:
        confirmed = ctx.targets.dns.confirm(
            name,
            rtype,
            value,
            previous_serial=max(serials) if serials else None,
            deadline_s=max(0.0, deadline - time.monotonic()),
            on_wait=shown_waits(ctx.timeline, step),
        )
        ctx.facts["dns_switched_at"] = utc_now()
        step.evidence = {"servers": [a.server for a in confirmed], "ttl": ttl}


# -- 6. smoke ---------------------------------------------------------------------
def smoke(ctx: PhaseContext, site: Role = "dr") -> dt.datetime:
    """Probe the service by its DNS name until it answers; returns when it did. Without
    smoke probes, the endpoint of ``site`` (the one the name now points at) must serve."""
    probes = ctx.plan.smoke
    if not probes:
        with ctx.timeline.step(f"{'DR' if site == 'dr' else 'primary'} endpoint serves") as step:
            endpoint = str(getattr(ctx.plan.sites, site).endpoint)
            step.result = wait_endpoint(
                endpoint, serving_wanted=True, deadline_s=ctx.tier_deadline_s
            )
        return utc_now()
    with waiting_pool(len(probes)) as (pool, stop):
        results = list(pool.map(lambda p: smoke_until(p, ctx.targets.dns, stop=stop), probes))
    restored = utc_now()
    for probe, result in zip(probes, results, strict=True):
        with ctx.timeline.step(f"smoke {probe.name}") as step:
            step.evidence = {"url": str(probe.url), "address": result.address,
                             "status": result.status, "body": result.detail}  # fmt: skip
            if not result.ok:  # probed until its timeout
                raise DeadlinePassed(f"smoke {probe.name}", f"{probe.url}: {result.detail}")
    return restored
