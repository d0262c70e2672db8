"""How long the critical tier waited for DR's low-priority work to give its GPUs back.

``preemption_seconds`` runs from the first scale-up at DR to the last GPU freed for the
critical tier: the moment the last of its GPU pods that had to wait (Pending, or
nominated to a node while the scheduler's victims terminated) was bound to a node. It is
watched from outside, as an operator would see it: DR's pods, read every
``POLL_S`` during the critical bring-up. A bring-up that preempted nothing measures 0.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

from drills.checks.areas.cluster_resources import GPU, ZERO, pod_requests
from drills.checks.areas.preemptible import pod_owner
from drills.errors import TargetError
from drills.plan import DrillPlan
from drills.takeover.timeline import Timeline, utc_now
from drills.targets.sites import Targets

log = logging.getLogger("drills.takeover.steps")
POLL_S = 0.1
PREEMPTED = "PreemptionByScheduler"


def _conditions(pod: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(c.get("type")): c for c in (pod.get("status") or {}).get("conditions") or []}


class PhaseContext(Protocol):
    """What of a takeover phase's context the watch reads (steps.phases.PhaseContext)."""

    plan: DrillPlan
    targets: Targets
    timeline: Timeline
    facts: dict[str, Any]

    @property
    def dry_run(self) -> bool: ...


class PreemptionWatch:
    """DR's pods during the critical bring-up: the scheduler's victims, and when each of
    the critical tier's waiting GPU pods was bound."""

    def __init__(self, ctx: PhaseContext) -> None:
        self._kube = ctx.targets.dr.kube
        self._critical = {(w.namespace, w.kind.value, w.name)
                          for w in ctx.plan.workloads_in("critical")}  # fmt: skip
        self.started_at = utc_now()
        self.victims: dict[str, str] = {}  # namespace/name -> the condition's message
        self._waiting: set[str] = set()  # critical GPU pods seen not bound
        # Critical pods seen nominated to a node: preemption, even when its victims were
        # gone between two looks.
        self.nominated: set[str] = set()
        self.last_freed_at: dt.datetime | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="preemption-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._look()  # the state at the end: the last binding may have come since

    def _run(self) -> None:
        while not self._stop.is_set():
            self._look()
            self._stop.wait(POLL_S)

    def _look(self) -> None:
        try:
            pods = self._kube.pods(None)
        except TargetError as exc:  # a missed look only blurs the end by one poll
            log.debug("preemption watch: %s", exc)
            return
        now = utc_now()
        for pod in pods:
            meta = pod.get("metadata") or {}
            key = f"{meta.get('namespace')}/{meta.get('name')}"
            target = _conditions(pod).get("DisruptionTarget")
            if target and target.get("reason") == PREEMPTED and target.get("status") == "True":
                self.victims.setdefault(key, str(target.get("message") or ""))
            owner = pod_owner(pod)
            spec = pod.get("spec") or {}
            if owner is None or (str(meta.get("namespace")), *owner) not in self._critical:
                continue
            if pod_requests({"spec": spec}).get(GPU, ZERO) <= 0:
                continue
            if not spec.get("nodeName"):
                self._waiting.add(key)
                if (pod.get("status") or {}).get("nominatedNodeName"):
                    self.nominated.add(key)
            elif key in self._waiting:
                self._waiting.discard(key)
                self.last_freed_at = now

    def seconds(self) -> float:
        """0 when nothing was preempted; else up to the last waiting pod bound."""
        if not (self.victims or self.nominated) or self.last_freed_at is None:
            return 0.0
        return max(0.0, (self.last_freed_at - self.started_at).total_seconds())


@contextmanager
def watched(ctx: PhaseContext) -> Iterator[None]:
    """Watch the critical bring-up; record ``preemption_seconds`` in the run's facts and a
    step naming the victims. A dry run watches nothing."""
    if ctx.dry_run:
        yield
        return
    watch = PreemptionWatch(ctx)
    watch.start()
    try:
        yield
    finally:
        watch.stop()
    seconds = round(watch.seconds(), 3)
    ctx.facts["preemption_seconds"] = seconds
    with ctx.timeline.step("GPUs taken back from DR's low-priority work") as step:
        step.evidence = {
            "preemption_seconds": seconds,
            "victims": sorted(watch.victims)[:20],
            "victim_count": len(watch.victims),
            "nominated": sorted(watch.nominated)[:20],
        }
        step.result = (
            f"{len(watch.victims)} pod(s) preempted; the last GPU freed after {seconds:.1f} s"
            if watch.victims or watch.nominated
            else "nothing preempted: the GPUs were free"
        )
        if not (watch.victims or watch.nominated):
            step.status = "skipped"
