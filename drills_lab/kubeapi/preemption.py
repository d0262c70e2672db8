"""The lab scheduler's priority and preemption, as kube-scheduler does them for GPUs.

A pod's priority is resolved from its ``priorityClassName`` when it is created (the
Priority admission plugin: ``spec.priority`` and ``spec.preemptionPolicy``). A GPU pod
that fits on no node stays Pending (``PodScheduled`` False, ``Unschedulable``); unless its
policy is ``Never``, the scheduler looks for the node where evicting pods of lower
priority frees room with the fewest victims (then the lowest-priority ones). The victims
get a ``DisruptionTarget`` condition (reason ``PreemptionByScheduler``) and are deleted
gracefully; the preemptor's ``status.nominatedNodeName`` names the node, and it binds once
the victims are gone and their GPUs free; until then it chooses no more victims, and the
room is held for it: a pod of lower priority neither takes it nor is nominated for it. A
pod whose GPUs are held by higher priority work stays Pending until they are freed: a
Deployment's evicted replica is recreated Pending by its controller and waits there.

Pods without GPUs, and GPU pods where no priority decides (nothing of another priority
holds the GPUs), are placed as the controller always placed them.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from drills_lab.kubeapi import kueue as kueuelib
from drills_lab.kubeapi import pods as podlib
from drills_lab.kubeapi.objects import condition, dig, now_rfc3339
from drills_lab.kubeapi.status import ApiError
from drills_lab.kubeapi.store import ResourceStore

log = logging.getLogger("drills_lab.kubeapi.preemption")

NEVER = "Never"
PREEMPT_LOWER = "PreemptLowerPriority"
# The lab's containers exit at once on SIGTERM: a victim is gone this long after it was
# chosen, long enough for a client to see it terminating.
VICTIM_GRACE_S = 0.5
UNSCHEDULABLE = "Unschedulable"
WAITING_FOR_VICTIMS = "waiting for the GPUs of preempted pods"


@dataclass(frozen=True)
class Placement:
    """Where a new pod goes: ``node`` to bind it; ``pending`` to leave it waiting (with
    ``nominated`` when victims were chosen for it); neither: the controller decides."""

    node: str | None = None
    pending: bool = False
    nominated: str | None = None
    message: str = ""


ANYWHERE = Placement()


def resolve_priority(store: ResourceStore, spec: dict[str, Any]) -> None:
    """Stamp ``spec`` with its class's value and preemption policy, as admission does."""
    name = spec.get("priorityClassName")
    pc = store.get("priorityclasses", None, str(name)) if name else None
    if pc is None:
        return
    spec["priority"] = int(pc.get("value") or 0)
    spec["preemptionPolicy"] = str(pc.get("preemptionPolicy") or PREEMPT_LOWER)


def priority(pod: dict[str, Any]) -> int:
    value = dig(pod, "spec", "priority")
    return int(value) if isinstance(value, int) else 0


def is_terminating(pod: dict[str, Any]) -> bool:
    return bool(dig(pod, "metadata", "deletionTimestamp"))


def is_waiting(pod: dict[str, Any]) -> bool:
    """Not bound yet: Pending unschedulable, or held by a scheduling gate."""
    scheduled = condition(pod, "PodScheduled")
    return not dig(pod, "spec", "nodeName") and (
        bool(dig(pod, "spec", "schedulingGates"))
        or (scheduled is not None and scheduled.get("status") == "False")
    )


def _of_a_job(pod: dict[str, Any]) -> bool:
    """A Job's pod: the Job controller binds it by every filter (drills_lab.kubeapi.jobs),
    where this sweep knows GPUs only and would bind a pod no node fits."""
    refs = dig(pod, "metadata", "ownerReferences") or []
    return any(r.get("kind") == "Job" and r.get("controller") for r in refs)


def _nominated_room(
    nodes: list[dict[str, Any]],
    taken: dict[str, int],
    held: dict[str, int],
    pods: list[dict[str, Any]],
    wanted: int,
) -> bool:
    """Room already being freed on a node (victims terminating) that the pods nominated
    there, of the new pod's priority or higher, do not hold: the new pod waits for it rather
    than preempt more. A nomination of lower priority holds nothing against it."""
    for node in nodes:
        name = node["metadata"]["name"]
        freeing = sum(
            podlib.gpus_of(p["spec"])
            for p in pods
            if p["spec"].get("nodeName") == name and is_terminating(p)
        )
        free = podlib.node_gpus(node) - taken.get(name, 0) - held.get(name, 0)
        if free + freeing >= wanted:
            return True
    return False


def _held_for_nominated(pod: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, int]:
    """GPUs by node that pods nominated there, and not bound yet, hold for themselves:
    kube-scheduler counts a nominated pod of this pod's priority or higher as running on
    its node, so that a pod of lower priority does not take the room its preemption freed."""
    mine, uid = priority(pod), pod["metadata"].get("uid")
    held: dict[str, int] = {}
    for p in pods:
        node = dig(p, "status", "nominatedNodeName")
        waiting = bool(node) and not dig(p, "spec", "nodeName") and not is_terminating(p)
        if waiting and priority(p) >= mine and p["metadata"].get("uid") != uid:
            held[node] = held.get(node, 0) + podlib.gpus_of(p["spec"])
    return held


class PriorityScheduler:
    """Placement by priority for one site's store; the controller calls it each pass."""

    def __init__(self, store: ResourceStore) -> None:
        self._store = store
        self._gone_at: dict[str, float] = {}  # victim uid -> monotonic time it is deleted
        # preemptor (namespace, name) -> its victims still in the store, kept (empty once
        # they are gone) until it binds: one round in flight at a time, and a second one seen
        self._victims_of: dict[tuple[str, str], set[str]] = {}

    # -- placing a new pod ---------------------------------------------------------

    def place(
        self, pod: dict[str, Any], nodes: list[dict[str, Any]], usable: list[str]
    ) -> Placement:
        wanted = podlib.gpus_of(pod.get("spec") or {})
        if wanted <= 0:
            return ANYWHERE
        pods = self._store.list("pods")
        taken = podlib.gpus_by_node(pods)
        held = _held_for_nominated(pod, pods)
        gpu_nodes = [n for n in nodes if n["metadata"]["name"] in usable]
        for node in gpu_nodes:
            name = str(node["metadata"]["name"])
            if podlib.node_gpus(node) - taken.get(name, 0) - held.get(name, 0) >= wanted:
                return Placement(node=name)
        mine = priority(pod)
        if self._victims_left(pod, pods) or _nominated_room(gpu_nodes, taken, held, pods, wanted):
            return Placement(pending=True, message=WAITING_FOR_VICTIMS)
        # Bound or waiting for GPUs: when all are of this pod's priority, none decides.
        uid = pod["metadata"].get("uid")
        others = [p for p in pods if podlib.gpus_of(p["spec"]) and p["metadata"]["uid"] != uid]
        if not any(priority(p) != mine for p in others):
            return ANYWHERE  # no priority decides: placed as before
        if dig(pod, "spec", "preemptionPolicy") != NEVER:
            chosen = self._victims(gpu_nodes, pods, taken, held, wanted, mine)
            if chosen is not None:
                target, victims = chosen
                self._note_round(pod, victims, pods, target)
                for victim in victims:
                    self._evict(victim, pod)
                return Placement(pending=True, nominated=target, message="preempting")
        return Placement(
            pending=True,
            message=f"0/{len(nodes)} nodes are available: {len(gpu_nodes)} Insufficient "
            f"{podlib.GPU}; preemption: not eligible or no lower-priority victims",
        )

    def _victims_left(self, pod: dict[str, Any], pods: list[dict[str, Any]]) -> bool:
        """Whether victims this pod chose are still in the store: its room is not freed yet,
        even where a write to mark one as terminating was lost."""
        key = (pod["metadata"].get("namespace") or "", pod["metadata"]["name"])
        chosen = self._victims_of.get(key)
        if not chosen:
            return False
        self._victims_of[key] = chosen & {p["metadata"]["uid"] for p in pods}
        return bool(self._victims_of[key])

    def _note_round(
        self,
        pod: dict[str, Any],
        victims: list[dict[str, Any]],
        pods: list[dict[str, Any]],
        node: str,
    ) -> None:
        """Keep the round's victims; a second round for one preemptor is legitimate (the
        room it freed was taken) but rare, so the lab says what it saw."""
        m = pod["metadata"]
        key = (m.get("namespace") or "", m["name"])
        if key in self._victims_of:
            on_node = [
                f"{p['metadata']['name']}(prio {priority(p)}, {podlib.gpus_of(p['spec'])} GPU"
                f"{', terminating' if is_terminating(p) else ''})"
                for p in pods
                if p["spec"].get("nodeName") == node
            ]
            log.warning(
                "pod %s/%s preempts again on %s; bound there: %s",
                key[0], key[1], node, ", ".join(on_node) or "nothing",
            )  # fmt: skip
        self._victims_of[key] = {v["metadata"]["uid"] for v in victims}

    @staticmethod
    def _victims(
        nodes: list[dict[str, Any]],
        pods: list[dict[str, Any]],
        taken: dict[str, int],
        held: dict[str, int],
        wanted: int,
        mine: int,
    ) -> tuple[str, list[dict[str, Any]]] | None:
        """The node where evicting lower-priority pods frees ``wanted`` GPUs with the fewest
        victims (then the lowest highest-victim priority); its victims, lowest priority first.
        The room held for nominated pods of this priority or higher is not free: a pod that
        only a nomination keeps out has no victims to choose (kube-scheduler's preemption
        counts those pods as running on their node too)."""
        best: tuple[tuple[int, int], str, list[dict[str, Any]]] | None = None
        for node in nodes:
            name = str(node["metadata"]["name"])
            free = podlib.node_gpus(node) - taken.get(name, 0) - held.get(name, 0)
            lower = [
                p
                for p in pods
                if p["spec"].get("nodeName") == name
                and not is_terminating(p)
                and priority(p) < mine
                and podlib.gpus_of(p["spec"]) > 0
            ]
            lower.sort(key=lambda p: (priority(p), p["metadata"]["creationTimestamp"]))
            victims: list[dict[str, Any]] = []
            for p in lower:
                if free >= wanted:
                    break
                victims.append(p)
                free += podlib.gpus_of(p["spec"])
            if free < wanted:
                continue
            rank = (len(victims), max(map(priority, victims), default=0))
            if best is None or rank < best[0]:
                best = (rank, name, victims)
        return None if best is None else (best[1], best[2])

    def _evict(self, victim: dict[str, Any], preemptor: dict[str, Any]) -> None:
        """Mark the victim as the scheduler does, then delete it gracefully."""
        m = victim["metadata"]
        reason = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": f"{podlib.GPU}: preempted by pod {preemptor['metadata']['name']}",
            "lastTransitionTime": now_rfc3339(),
        }

        def mark(p: dict[str, Any]) -> dict[str, Any]:
            status = dict(p.get("status") or {})
            others = [c for c in status.get("conditions") or [] if c.get("type") != reason["type"]]
            status["conditions"] = [*others, reason]
            return {**p, "status": status}

        with contextlib.suppress(ApiError):  # gone already: its GPUs are free
            self._store.patch("pods", m["namespace"], m["name"], mark, subresource="status")

            def terminating(p: dict[str, Any]) -> dict[str, Any]:
                meta = {**p["metadata"], "deletionTimestamp": now_rfc3339(),
                        "deletionGracePeriodSeconds":
                        int(p["spec"].get("terminationGracePeriodSeconds") or 30)}  # fmt: skip
                return {**p, "metadata": meta}

            self._store.patch("pods", m["namespace"], m["name"], terminating)
        self._gone_at[m["uid"]] = time.monotonic() + VICTIM_GRACE_S

    # -- each pass ------------------------------------------------------------------

    def sweep(self, nodes: list[dict[str, Any]], usable: list[str]) -> float:
        """Delete the victims whose grace is over and bind the waiting pods that now fit,
        highest priority first; the monotonic time of the next victim's end."""
        now = time.monotonic()
        for pod in self._store.list("pods"):
            uid = pod["metadata"]["uid"]
            if is_terminating(pod) and self._gone_at.setdefault(uid, now) <= now:
                with contextlib.suppress(ApiError):
                    self._store.delete(
                        "pods", pod["metadata"]["namespace"], pod["metadata"]["name"]
                    )
                self._gone_at.pop(uid, None)
        waiting = [
            p
            for p in self._store.list("pods")
            if is_waiting(p)
            and not dig(p, "spec", "schedulingGates")
            and not is_terminating(p)
            and not _of_a_job(p)
        ]
        waiting.sort(key=lambda p: (-priority(p), p["metadata"]["creationTimestamp"]))
        # A preemptor bound or gone has no round left to count.
        still = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in waiting}
        self._victims_of = {k: v for k, v in self._victims_of.items() if k in still}
        for pod in waiting:
            self._retry(pod, nodes, usable)
        return min(self._gone_at.values(), default=now + 3600.0)

    def _retry(self, pod: dict[str, Any], nodes: list[dict[str, Any]], usable: list[str]) -> None:
        placement = self.place(pod, nodes, usable)
        if placement == ANYWHERE and podlib.gpus_of(pod["spec"]) <= 0 and usable:
            placement = Placement(node=usable[0])  # an ungated pod without GPUs fits anywhere
        m = pod["metadata"]
        with contextlib.suppress(ApiError):  # deleted meanwhile: nothing to bind
            if placement.node is not None:
                self._bind(pod, placement.node)
            elif placement.nominated is not None:
                self._store.patch(
                    "pods", m["namespace"], m["name"],
                    lambda p: {**p, "status": pending_status(p, placement)},
                    subresource="status",
                )  # fmt: skip

    def _bind(self, pod: dict[str, Any], node: str) -> None:
        """The binding: the pod gets its node; the kubelet takes it from there."""
        m = pod["metadata"]
        self._store.patch(
            "pods", m["namespace"], m["name"],
            lambda p: {**p, "spec": {**p["spec"], "nodeName": node}},
        )  # fmt: skip

        def scheduled(p: dict[str, Any]) -> dict[str, Any]:
            status = dict(p.get("status") or {})
            status.pop("nominatedNodeName", None)
            status["conditions"] = [
                c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"
            ] + [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now_rfc3339()}]
            return {**p, "status": status}

        self._store.patch("pods", m["namespace"], m["name"], scheduled, subresource="status")


def pending_status(pod: dict[str, Any], placement: Placement) -> dict[str, Any]:
    """A pod the scheduler could not bind yet: Pending, PodScheduled False."""
    gated = bool(dig(pod, "spec", "schedulingGates"))
    status: dict[str, Any] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "SchedulingGated" if gated else UNSCHEDULABLE,
                "message": "Scheduling is blocked due to non-empty scheduling gates"
                if gated
                else placement.message,
                "lastTransitionTime": now_rfc3339(),
            }
        ],
        "qosClass": (pod.get("status") or {}).get("qosClass", "BestEffort"),
    }
    nominated = placement.nominated or dig(pod, "status", "nominatedNodeName")
    if nominated:
        status["nominatedNodeName"] = nominated
    return status


def schedule_new(
    store: ResourceStore,
    scheduler: PriorityScheduler,
    kueue: kueuelib.KueueModel,
    body: dict[str, Any],
    nodes: list[dict[str, Any]],
    usable: list[str],
) -> tuple[Placement, dict[str, Any] | None]:
    """Admission, Kueue's gate and the scheduler for a pod a controller makes: the pod
    created and left waiting (gated, or Pending) when it must wait; else where to bind it,
    for the controller to create it there."""
    resolve_priority(store, body["spec"])
    if kueuelib.manages(store, body):
        kueuelib.gate(body)
        placement = Placement(pending=True)
    else:
        placement = scheduler.place(body, nodes, usable)
        if not placement.pending:
            return placement, None
    pod = store.create("pods", body)
    kueue.created(pod)
    m = pod["metadata"]
    return placement, store.patch(
        "pods", m["namespace"], m["name"],
        lambda p: {**p, "status": pending_status(p, placement)},
        subresource="status",
    )  # fmt: skip
