"""The fence and its proof: what must be seen from outside before anything changes, and
the primary's ingress and writers closed, verified from outside.

A drill must see the primary serve before it fences it, or the fence proves nothing; an
incident goes on past a silent primary only when a person forces it (--force-unfenced).
"""

from __future__ import annotations

import time
from typing import Any

from drills.checks.areas.identity import distinct_result
from drills.checks.areas.wayback import running_writers
from drills.checks.base import Status
from drills.checks.runner import ReadinessReport
from drills.errors import RunRefused, StepFailed, TargetError
from drills.plan import ControllerFence
from drills.takeover.steps.changes import ingress_address, workload_address
from drills.takeover.steps.dns_values import record_where_planned
from drills.takeover.steps.images import check_remapped_images
from drills.takeover.steps.phases import (
    PhaseContext,
    look,
    persist,
    wait_endpoint,
    wait_until,
    waiting_pool,
)
from drills.takeover.timeline import StepRecord
from drills.targets.probe import ProbeResult

FENCED_CLASS = "drills-fenced"  # an IngressClass no controller serves


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


__all__ = ["FENCED_CLASS", "fence_primary", "preflight_guard"]
