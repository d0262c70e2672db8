"""The lab's Kueue (``kueue.x-k8s.io/v1beta1``): Workloads admitted and evicted by quota
and priority, for the pods Kueue manages.

Kueue's pod integration manages a pod that carries the ``kueue.x-k8s.io/queue-name``
label in a namespace its ``podOptions.namespaceSelector`` selects; here, a namespace
labelled ``kueue-managed=true`` (the lab's seeded namespaces are not, so their pods run as
before). Such a pod is created with the ``kueue.x-k8s.io/admission`` scheduling gate and a
Workload of one pod set, in its LocalQueue, at its priority.

Each pass admits pending Workloads, highest priority first, when their ClusterQueue's
nominal quota (plus what it may borrow from its cohort) covers them: ``status.admission``
is set, the ``QuotaReserved`` and ``Admitted`` conditions turn True and the pod's gate is
removed, so the scheduler places it. A Workload that does not fit may evict admitted ones
of lower priority in its own ClusterQueue (``preemption.withinClusterQueue:
LowerPriority``), and ones borrowing in other ClusterQueues of its cohort
(``preemption.reclaimWithinCohort``: ``Any``, or ``LowerPriority`` for lower ones). An
evicted Workload gets ``Evicted`` (reason ``Preempted``), loses its admission, and its pod
is deleted: its Deployment makes a new, gated one, which queues again.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections import defaultdict
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from drills.targets.kube import parse_quantity
from drills_lab.kubeapi.objects import condition, dig, now_rfc3339
from drills_lab.kubeapi.status import ApiError
from drills_lab.kubeapi.store import ResourceStore

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
MANAGED_NAMESPACE_LABEL = "kueue-managed"
GATE = "kueue.x-k8s.io/admission"
API_VERSION = "kueue.x-k8s.io/v1beta1"
EVICTED_KEPT_S = 60.0  # an evicted Workload stays readable this long after its pod is gone
ZERO = Decimal(0)
Usage = dict[str, Decimal]


def manages(store: ResourceStore, pod: dict[str, Any]) -> bool:
    labels = dig(pod, "metadata", "labels") or {}
    if QUEUE_LABEL not in labels:
        return False
    ns = store.get("namespaces", None, pod["metadata"]["namespace"]) or {}
    return (dig(ns, "metadata", "labels") or {}).get(MANAGED_NAMESPACE_LABEL) == "true"


def gate(pod: dict[str, Any]) -> None:
    """What Kueue's pod webhook does to a pod it manages, before it is stored."""
    pod["metadata"]["labels"] = {**pod["metadata"].get("labels", {}), MANAGED_LABEL: "true"}
    pod["spec"]["schedulingGates"] = [{"name": GATE}]


def _requests(spec: dict[str, Any]) -> Usage:
    total: Usage = defaultdict(lambda: ZERO)
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        for name, value in {**(resources.get("limits") or {}),
                            **(resources.get("requests") or {})}.items():  # fmt: skip
            total[str(name)] += parse_quantity(value)
    return dict(total)


def workload_for(pod: dict[str, Any]) -> dict[str, Any]:
    """The Workload Kueue makes for a managed pod: one pod set, the pod's queue and priority."""
    m = pod["metadata"]
    suffix = hashlib.sha256(m["uid"].encode()).hexdigest()[:5]
    spec = pod["spec"]
    containers = [
        {"name": c.get("name", ""), "resources": c.get("resources") or {}}
        for c in spec.get("containers") or []
    ]
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": f"pod-{m['name']}-{suffix}"[:253],
            "namespace": m["namespace"],
            "labels": {"kueue.x-k8s.io/job-uid": m["uid"]},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": m["name"],
                    "uid": m["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {
            "queueName": m["labels"][QUEUE_LABEL],
            "priorityClassName": spec.get("priorityClassName", ""),
            "priorityClassSource": "scheduling.k8s.io/priorityclass",
            "priority": int(spec.get("priority") or 0),
            "podSets": [
                {"name": "main", "count": 1, "template": {"spec": {"containers": containers}}}
            ],
        },
    }


def _pod_uid(wl: dict[str, Any]) -> str:
    return str((dig(wl, "metadata", "labels") or {}).get("kueue.x-k8s.io/job-uid", ""))


def _demand(wl: dict[str, Any]) -> Usage:
    total: Usage = defaultdict(lambda: ZERO)
    for pod_set in dig(wl, "spec", "podSets") or []:
        for name, value in _requests(dig(pod_set, "template", "spec") or {}).items():
            total[name] += value * int(pod_set.get("count") or 1)
    return dict(total)


def _is(wl: dict[str, Any], kind: str) -> bool:
    c = condition(wl, kind)
    return c is not None and c.get("status") == "True"


def quantity_text(value: Decimal) -> str:
    """A quantity as Kueue writes it in a status: whole units, else millis."""
    if value == value.to_integral_value():
        return str(int(value))
    return f"{int(value * 1000)}m"


class CohortBook:
    """The quota of the ClusterQueues and what their admitted Workloads use."""

    def __init__(self, queues: list[dict[str, Any]]) -> None:
        self.queues = {q["metadata"]["name"]: q for q in queues}
        self.used: dict[str, Usage] = {name: {} for name in self.queues}

    def covered(self, cq: str) -> dict[str, tuple[str, Decimal, Decimal | None]]:
        """Resource → (flavor, nominal quota, borrowing limit)."""
        out: dict[str, tuple[str, Decimal, Decimal | None]] = {}
        for group in dig(self.queues[cq], "spec", "resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for res in flavor.get("resources") or []:
                    limit = res.get("borrowingLimit")
                    out.setdefault(str(res["name"]), (
                        str(flavor["name"]), parse_quantity(res.get("nominalQuota") or 0),
                        parse_quantity(limit) if limit is not None else None))  # fmt: skip
        return out

    def cohort(self, cq: str) -> str | None:
        spec = self.queues[cq].get("spec") or {}
        return spec.get("cohort") or spec.get("cohortName") or None

    def members(self, cq: str) -> list[str]:
        cohort = self.cohort(cq)
        return [n for n in self.queues if cohort is not None and self.cohort(n) == cohort]

    def fits(self, cq: str, demand: Usage) -> bool:
        covered = self.covered(cq)
        for res, amount in demand.items():
            if amount <= 0 or res not in covered:
                continue
            _, nominal, limit = covered[res]
            need = self.used[cq].get(res, ZERO) + amount
            lendable = sum(
                (max(ZERO, self.covered(o).get(res, ("", ZERO, None))[1]
                     - self.used[o].get(res, ZERO)) for o in self.members(cq) if o != cq),
                ZERO,
            )  # fmt: skip
            borrow = lendable if limit is None else min(lendable, limit)
            if need > nominal + borrow:
                return False
        return True

    def borrowing(self, cq: str) -> bool:
        covered = self.covered(cq)
        return any(self.used[cq].get(r, ZERO) > nominal for r, (_, nominal, _) in covered.items())

    def add(self, cq: str, demand: Usage, sign: int = 1) -> None:
        for res, amount in demand.items():
            self.used[cq][res] = self.used[cq].get(res, ZERO) + sign * amount


def _candidates(
    book: CohortBook,
    cq: str,
    wl: dict[str, Any],
    admitted: list[dict[str, Any]],
    queue_of: dict[str, str],
) -> list[dict[str, Any]]:
    """The admitted Workloads ``wl`` may evict under its ClusterQueue's ``preemption``:
    lower ones in the same queue, borrowing ones elsewhere in the cohort; lowest priority,
    then newest, first."""
    policy = dig(book.queues[cq], "spec", "preemption") or {}
    mine = int(dig(wl, "spec", "priority") or 0)
    within = policy.get("withinClusterQueue", "Never")
    reclaim = policy.get("reclaimWithinCohort", "Never")
    out = []
    for other in admitted:
        where = queue_of.get(other["metadata"]["uid"])
        lower = int(dig(other, "spec", "priority") or 0) < mine
        if where == cq:
            allowed = within == "LowerPriority" and lower
        else:
            allowed = (
                where in book.members(cq)
                and book.borrowing(str(where))
                and (reclaim == "Any" or (reclaim == "LowerPriority" and lower))
            )
        if allowed:
            out.append(other)
    out.sort(key=lambda w: str(w["metadata"]["creationTimestamp"]), reverse=True)
    out.sort(key=lambda w: int(dig(w, "spec", "priority") or 0))
    return out


def _with_usage(usage: list[dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def write(cq: dict[str, Any]) -> dict[str, Any]:
        return {**cq, "status": {**(cq.get("status") or {}), "flavorsUsage": usage}}

    return write


class KueueModel:
    """Kueue's admission for one site's store; the controller calls it each pass."""

    def __init__(self, store: ResourceStore) -> None:
        self._store = store
        self._gone: dict[str, float] = {}  # evicted Workload uid -> when its pod was gone

    def created(self, pod: dict[str, Any]) -> None:
        if dig(pod, "spec", "schedulingGates") and manages(self._store, pod):
            with contextlib.suppress(ApiError):
                self._store.create("workloads", workload_for(pod))

    def sweep(self) -> None:
        pods = {p["metadata"]["uid"]: p for p in self._store.list("pods")}
        workloads = self._collect(pods)
        if not workloads:
            return
        book = CohortBook(self._store.list("clusterqueues"))
        queue_of: dict[str, str] = {}
        for wl in workloads:
            cq = self._cluster_queue(wl)
            if cq in book.queues:
                queue_of[wl["metadata"]["uid"]] = cq
                if _is(wl, "QuotaReserved"):
                    book.add(cq, _demand(wl))
        pending = [w for w in workloads if not _is(w, "QuotaReserved") and not _is(w, "Evicted")
                   and w["metadata"]["uid"] in queue_of]  # fmt: skip
        pending.sort(key=lambda w: (-int(dig(w, "spec", "priority") or 0),
                                    w["metadata"]["creationTimestamp"]))  # fmt: skip
        admitted = [w for w in workloads if _is(w, "QuotaReserved")]
        for wl in pending:
            cq = queue_of[wl["metadata"]["uid"]]
            demand = _demand(wl)
            if not book.fits(cq, demand):
                victims = self._victims(book, cq, wl, demand, admitted, queue_of)
                if victims is None:
                    continue
                for victim in victims:
                    book.add(queue_of[victim["metadata"]["uid"]], _demand(victim), -1)
                    admitted.remove(victim)
                    self._evict(victim, pods.get(_pod_uid(victim)), wl)
            book.add(cq, demand)
            admitted.append(wl)
            self._admit(wl, cq, book, pods.get(_pod_uid(wl)))
        self._write_usage(book)

    def _collect(self, pods: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        """The Workloads whose pods are there; the others are collected as the garbage
        collector would (an evicted one kept a while, so that it can be read)."""
        out = []
        now = time.monotonic()
        for wl in self._store.list("workloads"):
            uid = _pod_uid(wl)
            if not uid:
                continue
            if uid in pods and not _is(wl, "Evicted"):
                out.append(wl)
                continue
            if uid in pods:
                continue
            gone = self._gone.setdefault(wl["metadata"]["uid"], now)
            if not _is(wl, "Evicted") or now - gone >= EVICTED_KEPT_S:
                with contextlib.suppress(ApiError):
                    self._store.delete(
                        "workloads", wl["metadata"]["namespace"], wl["metadata"]["name"]
                    )
                self._gone.pop(wl["metadata"]["uid"], None)
        return out

    def _cluster_queue(self, wl: dict[str, Any]) -> str:
        lq = self._store.get(
            "localqueues", wl["metadata"]["namespace"], dig(wl, "spec", "queueName")
        )
        return str(dig(lq or {}, "spec", "clusterQueue") or "")

    @staticmethod
    def _victims(
        book: CohortBook,
        cq: str,
        wl: dict[str, Any],
        demand: Usage,
        admitted: list[dict[str, Any]],
        queue_of: dict[str, str],
    ) -> list[dict[str, Any]] | None:
        """The fewest admitted Workloads to evict, lowest priority and newest first, so that
        ``wl`` fits; None when the ClusterQueue's preemption policy allows no such set."""
        candidates = _candidates(book, cq, wl, admitted, queue_of)
        chosen: list[dict[str, Any]] = []
        for victim in candidates:
            chosen.append(victim)
            book.add(queue_of[victim["metadata"]["uid"]], _demand(victim), -1)
        fits = book.fits(cq, demand)
        for victim in chosen:  # the book is changed by the caller, for the ones it evicts
            book.add(queue_of[victim["metadata"]["uid"]], _demand(victim))
        if not fits:
            return None
        # The fewest: drop, highest priority first, the victims the fit does not need.
        for victim in sorted(chosen, key=lambda w: -int(dig(w, "spec", "priority") or 0)):
            rest = [v for v in chosen if v is not victim]
            for v in rest:
                book.add(queue_of[v["metadata"]["uid"]], _demand(v), -1)
            enough = book.fits(cq, demand)
            for v in rest:
                book.add(queue_of[v["metadata"]["uid"]], _demand(v))
            if enough:
                chosen = rest
        return chosen

    def _admit(
        self, wl: dict[str, Any], cq: str, book: CohortBook, pod: dict[str, Any] | None
    ) -> None:
        now = now_rfc3339()
        demand = _demand(wl)
        covered = book.covered(cq)
        admission = {"clusterQueue": cq, "podSetAssignments": [{
            "name": "main", "count": 1,
            "flavors": {r: covered[r][0] for r in demand if r in covered},
            "resourceUsage": {r: str(v) for r, v in demand.items()}}]}  # fmt: skip
        conditions = [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
             "message": f"Quota reserved in ClusterQueue {cq}", "lastTransitionTime": now},
            {"type": "Admitted", "status": "True", "reason": "Admitted",
             "message": "The workload is admitted", "lastTransitionTime": now},
        ]  # fmt: skip
        with contextlib.suppress(ApiError):
            self._write(wl, {"admission": admission, "conditions": conditions})
            if pod is not None:
                pm = pod["metadata"]
                self._store.patch(
                    "pods", pm["namespace"], pm["name"],
                    lambda p: {**p, "spec": {k: v for k, v in p["spec"].items()
                                             if k != "schedulingGates"}},
                )  # fmt: skip

    def _write(self, wl: dict[str, Any], status: dict[str, Any]) -> None:
        m = wl["metadata"]
        self._store.patch(
            "workloads", m["namespace"], m["name"], lambda o: {**o, "status": status},
            subresource="status",
        )  # fmt: skip

    def _evict(self, wl: dict[str, Any], pod: dict[str, Any] | None, by: dict[str, Any]) -> None:
        now = now_rfc3339()
        message = f"Preempted to accommodate a workload (UID: {by['metadata']['uid']})"
        conditions = [
            {"type": "Evicted", "status": "True", "reason": "Preempted", "message": message,
             "lastTransitionTime": now},
            {"type": "Preempted", "status": "True", "reason": "InClusterQueue",
             "message": message, "lastTransitionTime": now},
            {"type": "QuotaReserved", "status": "False", "reason": "Preempted",
             "message": message, "lastTransitionTime": now},
            {"type": "Admitted", "status": "False", "reason": "NoReservation",
             "message": "The workload has no reservation", "lastTransitionTime": now},
        ]  # fmt: skip
        with contextlib.suppress(ApiError):
            self._write(wl, {"conditions": conditions})
        if pod is not None:
            with contextlib.suppress(ApiError):
                self._store.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])

    def _write_usage(self, book: CohortBook) -> None:
        for name, cq in book.queues.items():
            covered = book.covered(name)
            by_flavor: dict[str, list[dict[str, str]]] = defaultdict(list)
            for res, (flavor, nominal, _) in covered.items():
                used = book.used[name].get(res, ZERO)
                borrowed = quantity_text(max(ZERO, used - nominal))
                by_flavor[flavor].append(
                    {"name": res, "total": quantity_text(used), "borrowed": borrowed}
                )
            usage = [{"name": f, "resources": r} for f, r in by_flavor.items()]
            if (cq.get("status") or {}).get("flavorsUsage") == usage:
                continue
            with contextlib.suppress(ApiError):
                self._store.patch(
                    "clusterqueues", None, name, _with_usage(usage), subresource="status"
                )
