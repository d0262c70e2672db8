"""Readiness check of category "Forecast": how long would a takeover started now take?

The forecast itself is :mod:`drills.forecast`; this module gathers what it needs from
the sites (warm replicas, DNS TTL, queue quota, free GPUs, DR's pod start speed) and the
history store (past drills, the last replication lag), and judges it against the RTO.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from drills.checks.areas.cluster_resources import (
    GPU,
    ZERO,
    fetch_workloads,
    node_facts,
    pack_gpus,
    pod_requests,
    ready_condition,
)
from drills.checks.areas.kueue import critical_quota_short
from drills.checks.areas.preemptible import pod_priority, yields_below
from drills.checks.base import CheckContext, Outcome, Status, check
from drills.errors import TargetError
from drills.forecast import CurrentState, Forecast, forecast, recent_samples
from drills.plan import Tier
from drills.targets.kube import KubeTarget, settled
from drills.timefmt import duration

FORECAST_CHECK = "forecast.rto"


def _warm(ctx: CheckContext) -> frozenset[str]:
    taken = [w for w in ctx.plan.workloads if w.tier is not Tier.BATCH and w.dr_replicas > 0]
    found = fetch_workloads(ctx.targets, "dr", taken)
    return frozenset(
        w.key for w in taken
        if found[w.key] is not None and settled(found[w.key] or {}, w.dr_replicas)[1]
    )  # fmt: skip


def _dns_ttl(ctx: CheckContext) -> float | None:
    record = ctx.plan.dns.record
    answers = ctx.targets.dns.read(record.name, str(record.type))
    return float(max((a.ttl or 0 for a in answers), default=0))


def _free_gpus(kube: KubeTarget, below: int | None, classes: dict[str, int]) -> list[int]:
    """Per usable DR node, the GPUs no running pod has requested, but for pods of a
    priority ``below`` the critical tier's: a takeover preempts them."""
    used: dict[str, Decimal] = {}
    for pod in kube.pods(None):
        node = (pod.get("spec") or {}).get("nodeName")
        if below is not None and pod_priority(pod, classes) < below:
            continue
        if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            used[node] = used.get(node, ZERO) + pod_requests(pod).get(GPU, ZERO)
    facts = [node_facts(n) for n in kube.nodes()]
    return [int(n.allocatable.get(GPU, ZERO) - used.get(n.name, ZERO)) for n in facts if n.usable]


def _blocked(ctx: CheckContext, warm: frozenset[str]) -> tuple[str, ...]:
    reasons = [f"Kueue quota short for the critical tier ({q})" for q in critical_quota_short(ctx)]
    replicas = [w.gpu for w in ctx.plan.workloads_in(Tier.CRITICAL) if w.key not in warm
                for _ in range(w.dr_replicas)]  # fmt: skip
    below, classes = yields_below(ctx)
    _, unplaced = pack_gpus(replicas, _free_gpus(ctx.targets.dr.kube, below, classes))
    if unplaced:
        reasons.append(f"{unplaced} critical GPU replica(s) fit in no free GPUs at DR")
    return tuple(reasons)


def _pod_start(ctx: CheckContext) -> float | None:
    """Seconds the DR sentinel's newest Ready pod took from creation to Ready."""
    sentinel = ctx.plan.sentinel
    if sentinel is None:
        return None
    kube = ctx.targets.dr.kube
    obj = kube.workload(sentinel.namespace, sentinel.kind.value, sentinel.name) or {}
    labels = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    if not labels:
        return None
    selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    starts = []
    for pod in kube.pods(sentinel.namespace, selector):
        created = (pod.get("metadata") or {}).get("creationTimestamp")
        ready = ready_condition(pod)
        if created and ready and ready.get("lastTransitionTime"):
            began = dt.datetime.fromisoformat(created.replace("Z", "+00:00"))
            done = dt.datetime.fromisoformat(ready["lastTransitionTime"].replace("Z", "+00:00"))
            starts.append((began, (done - began).total_seconds()))
    return max(starts)[1] if starts else None


def _replication_lag(ctx: CheckContext) -> float | None:
    """The worst dataset lag of the last stored readiness run: the RPO a takeover now risks."""
    if ctx.history is None:
        return None
    last = ctx.history.latest_readiness(ctx.plan.name)
    for result in (last.report.get("results") or []) if last else []:
        if result.get("id") == "data.rpo":
            lags = [d.get("lag_s") for d in (result.get("evidence") or {}).get("datasets", [])]
            known = [float(x) for x in lags if x is not None]
            return max(known) if known else None
    return None


def current_state(ctx: CheckContext) -> CurrentState:
    """The sites as they are now; a part that cannot be read is named in ``unreadable``,
    and makes the forecast unverified rather than failing it."""
    unread: list[tuple[str, TargetError]] = []
    values: dict[str, Any] = {}
    parts = (("warm", _warm), ("dns_ttl_s", _dns_ttl), ("pod_start_s", _pod_start),
             ("replication_lag_s", _replication_lag))  # fmt: skip
    for name, read in parts:
        try:
            values[name] = read(ctx)
        except TargetError as exc:
            unread.append((name, exc))
    warm = values.get("warm") or frozenset()
    try:
        blocked = _blocked(ctx, warm)
    except TargetError as exc:
        blocked = ()
        unread.append(("capacity", exc))
    return CurrentState(
        warm=warm, dns_ttl_s=values.get("dns_ttl_s"), blocked_by=blocked,
        pod_start_s=values.get("pod_start_s"), replication_lag_s=values.get("replication_lag_s"),
        notes=tuple(f"{name}: unknown ({exc.cause})" for name, exc in unread),
        unreadable=tuple(f"{name} ({exc})" for name, exc in unread),
    )  # fmt: skip


def plan_forecast(ctx: CheckContext) -> Forecast:
    samples = recent_samples(ctx.history, ctx.plan.name, ctx.now) if ctx.history else []
    return forecast(ctx.plan, samples, current_state(ctx))


def headline(f: Forecast) -> str:
    """ "a takeover now: about N s (target M)", the words the dashboard shows too."""
    return (f"a takeover now: about {duration(f.rto.point)} "
            f"({duration(f.rto.low)} to {duration(f.rto.high)}; "
            f"target {duration(f.target_s)})")  # fmt: skip


@check(
    FORECAST_CHECK,
    title="RTO forecast",
    category="Forecast",
    timeout_s=30,
    reads=(
        "The history store (this plan's drills of the last 90 days, the replication lag of "
        "its last readiness run) and the state now: warm workloads and free GPUs at DR, "
        "Kueue quota, the DNS TTL."
    ),
    blocks=(
        "The whole forecast interval is above the RTO target; an error, blocking, when any of"
        " the state now cannot be read."
    ),
    warns=(
        "The forecast point is above the target, or the critical tier could not come up now "
        "(no quota, no free GPUs)."
    ),
    remediation=(
        "Shorten the dominating phase or workload the evidence names (warm standbys, lower "
        "TTL, more DR capacity), or drill again so the forecast rests on recent drills."
    ),
)
def forecast_rto(ctx: CheckContext) -> Outcome:
    """A takeover started now would restore service within the plan's RTO, as forecast from
    this plan's drills of the last 90 days (each one's per-phase and per-workload durations,
    the newest weighted most) and the state now: workloads already warm at DR, Kueue quota
    and free GPUs for the critical tier, the DNS TTL, the last replication lag.

    The evidence is the forecast: RTO, client-visible RTO and full-capacity time, each a
    point and an interval, the dominating phase and workload, and what it is based on
    (without drills: a stated model). A point above the target warns; the check fails and
    blocks only when the whole interval is above it. A critical tier that could not come
    up now (no quota, no free GPUs) warns: no takeover started now would complete. When
    any of the state now cannot be read (a site unreachable, or answering as something
    else), the forecast is unverified: an error, never a pass.
    """
    f = plan_forecast(ctx)
    if not f.verified:
        return Outcome(
            Status.ERROR,
            "forecast unverified: could not read " + "; ".join(f.state.unreadable),
            {"verified": False, "unreadable": list(f.state.unreadable),
             "unverified_estimate": f.to_json()},
            remediation="Make the DR cluster and the DNS servers readable from here, then "
            "re-run the check: a forecast over unread state is a guess.",
            blocking=True,
        )  # fmt: skip
    evidence = f.to_json()
    summary = f"{headline(f)}; {f.basis}"
    if not f.completes:
        return Outcome(Status.WARN, f"a takeover now would not complete: {f.state.blocked_by[0]}",
                       evidence, remediation="Fix the capacity the critical tier lacks at DR "
                       "(see cluster.queue_quota and cluster.gpu_capacity).")  # fmt: skip
    if f.certainly_above:
        return Outcome(Status.FAIL, summary, evidence, blocking=True,
                       remediation=_remedy(f))  # fmt: skip
    if f.above_target or f.rto.high > f.target_s:
        status = Status.WARN if f.above_target else Status.PASS
        return Outcome(status, summary, evidence, remediation=_remedy(f))
    return Outcome(Status.PASS, summary, evidence)


def _remedy(f: Forecast) -> str:
    where = f"the {f.dominant_phase} phase" if f.dominant_phase else "the slowest phase"
    who = f" ({f.dominant_workload})" if f.dominant_workload else ""
    return (
        f"Shorten {where}{who}: keep replicas warm at DR, pre-pull images, or raise the "
        "RTO target to what the drills show."
    )
