"""The rollout controller: deployments and statefulsets get pods, and pods get ready.

It stands in for the deployment, statefulset and garbage-collector
controllers and the kubelet at once. It wakes on every store change (a
drill's measured RTO includes its latency, so it must not poll slowly) and
on its own timers: a pod turns ready ``ready_delay`` seconds after it was
created, or never for a workload annotated ``lab.drills.dev/never-ready``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections import defaultdict
from typing import Any

from drills_lab.kubeapi import daemonsets as dslib
from drills_lab.kubeapi import jobs as joblib
from drills_lab.kubeapi import pods as podlib
from drills_lab.kubeapi import workload_status
from drills_lab.kubeapi.kueue import KueueModel
from drills_lab.kubeapi.objects import annotation, dig
from drills_lab.kubeapi.preemption import (
    PriorityScheduler,
    is_terminating,
    is_waiting,
    schedule_new,
)
from drills_lab.kubeapi.status import ApiError
from drills_lab.kubeapi.store import ResourceStore
from drills_lab.kubeapi.strategy import random_suffix

log = logging.getLogger("drills_lab.kubeapi.controller")

READY_DELAY_ANNOTATION = "lab.drills.dev/ready-delay-seconds"
NEVER_READY_ANNOTATION = "lab.drills.dev/never-ready"
OWNER_KINDS = ("Deployment", "StatefulSet", "DaemonSet")
# A pass reports every timer it keeps (a pod's ready delay, a victim's grace, a Job's run, a
# rollout's deadline), so the loop sleeps until a change or the next of them. It used to wake
# each second besides: in an idle lab those passes found nothing to do and were half its CPU
# (the suite keeps some ten labs up at a time). The wake stays, as a safety net only.
_IDLE_WAKE = 30.0
_AFTER_FAILURE = 1.0  # a pass that raised is tried again soon
_RETRY = 0.05  # after a failed write


class RolloutController:
    def __init__(
        self,
        store: ResourceStore,
        ready_delay: float,
        name: str = "lab",
        jobs: joblib.JobController | None = None,
    ) -> None:
        self._store = store
        self._jobs = jobs
        self._delay = ready_delay
        self._name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ready_at: dict[str, float] = {}  # pod uid -> monotonic time it turns ready
        self._nodes: list[str] = []  # schedulable nodes, refreshed every pass
        self._all_nodes: list[dict[str, Any]] = []
        self._placed = 0
        self._scheduler = PriorityScheduler(store)
        self._kueue = KueueModel(store)

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, name=f"kubeapi-controller-{self._name}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._store.wake_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._jobs is not None:
            self._jobs.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            seen = self._store.resource_version
            try:
                wait = self.reconcile()
            except Exception:
                # Keep the lab alive on a bug; the log has the traceback.
                log.exception("reconcile in %s failed", self._name)
                wait = _AFTER_FAILURE
            self._store.wait_for_change(seen, min(max(wait, 0.0), _IDLE_WAKE))

    # -- one pass --------------------------------------------------------

    def reconcile(self) -> float:
        """Bring every workload one step closer to its spec; seconds until the next timer."""
        now = time.monotonic()
        self._all_nodes = self._store.list("nodes")
        self._nodes = [
            n["metadata"]["name"] for n in self._all_nodes if not dig(n, "spec", "unschedulable")
        ]
        # Kueue admits, then the scheduler binds what waits and ends the preempted pods.
        self._kueue.sweep()
        due = self._scheduler.sweep(self._all_nodes, self._nodes)
        owned: dict[str, list[dict[str, Any]]] = defaultdict(list)
        listed_at = self._store.resource_version
        pods = self._store.list("pods")
        for pod in pods:
            uid = podlib.owner_uid(pod, OWNER_KINDS)
            # A terminating pod no longer counts as a replica: its owner replaces it.
            if uid is not None and not is_terminating(pod):
                owned[uid].append(pod)
        seen = {p["metadata"]["uid"] for p in pods}
        self._ready_at = {uid: t for uid, t in self._ready_at.items() if uid in seen}
        workloads = (
            [(self._deployment, w) for w in self._store.list("deployments")]
            + [(self._statefulset, w) for w in self._store.list("statefulsets")]
            + [(self._daemonset, w) for w in self._store.list("daemonsets")]
        )
        for sync, w in workloads:
            try:
                due = min(due, sync(w, owned.pop(w["metadata"]["uid"], []), now))
            except ApiError as exc:
                # A write raced with a client's (a conflict, an object gone) or
                # was refused: this workload is looked at again shortly.
                log.debug("sync of %s failed: %s", w["metadata"]["name"], exc.reason)
                due = min(due, now + _RETRY)
        for orphans in owned.values():  # their owner is gone: garbage-collect
            for pod in orphans:
                self._delete(pod)
        if self._jobs is not None:
            if self._store.resource_version != listed_at:  # the workloads bound pods meanwhile
                pods = self._store.list("pods")
            due = min(due, self._jobs.reconcile(now, pods, self._all_nodes))
        return due - now

    def _workload_delay(self, w: dict[str, Any]) -> float:
        text = annotation(w, READY_DELAY_ANNOTATION)
        try:
            return max(float(text), 0.0) if text is not None else self._delay
        except ValueError:
            return self._delay

    @staticmethod
    def _never_ready(w: dict[str, Any]) -> bool:
        template = dig(w, "spec", "template") or {}
        values = (
            annotation(w, NEVER_READY_ANNOTATION),
            annotation(template, NEVER_READY_ANNOTATION),
        )
        return any((v or "").lower() == "true" for v in values)

    def _advance(
        self, w: dict[str, Any], pods: list[dict[str, Any]], now: float
    ) -> tuple[list[dict[str, Any]], float]:
        """Turn pods whose time has come ready; the pods as they now are, and the next due time."""
        due, out = math.inf, []
        never = self._never_ready(w)
        never_on = dslib.never_ready_on(w)
        for pod in pods:
            uid = pod["metadata"]["uid"]
            if is_waiting(pod):  # not bound: no kubelet starts it
                out.append(pod)
                continue
            if podlib.is_ready(pod) or never or dslib.pod_node(pod) in never_on:
                self._ready_at.pop(uid, None)
                out.append(pod)
                continue
            ready_at = self._ready_at.setdefault(uid, now + self._workload_delay(w))
            if ready_at <= now:
                self._ready_at.pop(uid, None)
                pod = self._set_pod_status(pod, ready=True)
            else:
                due = min(due, ready_at)
            out.append(pod)
        return out, due

    def _create(
        self, w: dict[str, Any], name: str, labels: dict[str, str], now: float
    ) -> dict[str, Any]:
        body = podlib.new_pod(w, name, labels, None)
        if w["kind"] == "StatefulSet":
            body["spec"]["hostname"] = name
            if dig(w, "spec", "serviceName"):
                body["spec"]["subdomain"] = w["spec"]["serviceName"]
        # A GPU pod goes to the first node with room for its GPUs, as the scheduler would
        # place it (the GPU metrics follow the pods), or waits: gated by Kueue, or Pending
        # while higher-priority work holds the GPUs (drills_lab.kubeapi.preemption).
        placement, pod = schedule_new(self._store, self._scheduler, self._kueue, body,
                                      self._all_nodes, self._nodes)  # fmt: skip
        if pod is not None:
            return pod
        node = placement.node
        if node is None and self._nodes:
            node = self._nodes[self._placed % len(self._nodes)]
            self._placed += 1
        if node:
            body["spec"]["nodeName"] = node
        pod = self._store.create("pods", body)
        self._ready_at[pod["metadata"]["uid"]] = now + self._workload_delay(w)
        return self._set_pod_status(pod, ready=False)

    def _set_pod_status(self, pod: dict[str, Any], *, ready: bool) -> dict[str, Any]:
        m = pod["metadata"]
        return self._store.patch(
            "pods",
            m["namespace"],
            m["name"],
            lambda p: {**p, "status": podlib.pod_status(p, ready)},
            subresource="status",
        )

    def _delete(self, pod: dict[str, Any]) -> None:
        with contextlib.suppress(ApiError):  # already gone: that was the goal
            self._store.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
        self._ready_at.pop(pod["metadata"]["uid"], None)

    # -- deployments -----------------------------------------------------

    def _deployment(self, d: dict[str, Any], pods: list[dict[str, Any]], now: float) -> float:
        desired = int(dig(d, "spec", "replicas") or 0)
        pod_hash = podlib.template_hash(d["spec"]["template"])
        pods, due = self._advance(d, pods, now)
        current = [p for p in pods if podlib.label(p, "pod-template-hash") == pod_hash]
        old = [p for p in pods if podlib.label(p, "pod-template-hash") != pod_hash]
        if len(current) > desired:
            # Like the ReplicaSet controller: unready pods go first, then the newest.
            current.sort(key=lambda p: p["metadata"]["creationTimestamp"], reverse=True)
            current.sort(key=podlib.is_ready)
            for pod in current[: len(current) - desired]:
                self._delete(pod)
            current = current[len(current) - desired :]
        name = d["metadata"]["name"]
        while len(current) < desired:
            pod_name = f"{name}-{pod_hash}-{random_suffix()}"
            current.append(self._create(d, pod_name, {"pod-template-hash": pod_hash}, now))
            due = min(due, self._ready_at.get(current[-1]["metadata"]["uid"], math.inf))
        recreate = dig(d, "spec", "strategy", "type") == "Recreate"
        if old and (recreate or sum(map(podlib.is_ready, current)) >= desired):
            for pod in old:
                self._delete(pod)
            old = []
        status = workload_status.deployment(d, current, old, f"{name}-{pod_hash}")
        self._write_status("deployments", d, status)
        deadline = workload_status.progress_deadline(d, status)
        return min(due, now + deadline) if deadline is not None else due

    # -- statefulsets ----------------------------------------------------

    def _statefulset(self, s: dict[str, Any], pods: list[dict[str, Any]], now: float) -> float:
        name = s["metadata"]["name"]
        desired = int(dig(s, "spec", "replicas") or 0)
        revision = f"{name}-{podlib.template_hash(s['spec']['template'])}"
        pods, due = self._advance(s, pods, now)
        by_index: dict[int, dict[str, Any]] = {}
        for pod in pods:
            index = pod["metadata"]["name"].rsplit("-", 1)[-1]
            if index.isdigit() and int(index) < desired:
                by_index[int(index)] = pod
            else:
                self._delete(pod)  # scaling down removes them at once
        ordered = dig(s, "spec", "podManagementPolicy") != "Parallel"
        all_ready = len(by_index) == desired and all(map(podlib.is_ready, by_index.values()))
        if all_ready and dig(s, "spec", "updateStrategy", "type") != "OnDelete":
            partition = int(dig(s, "spec", "updateStrategy", "rollingUpdate", "partition") or 0)
            stale = [
                i
                for i, p in by_index.items()
                if i >= partition and podlib.label(p, "controller-revision-hash") != revision
            ]
            if stale:  # roll one pod at a time, highest ordinal first
                self._delete(by_index.pop(max(stale)))
        for i in range(desired):
            if i in by_index:
                continue
            if ordered and not all(
                j in by_index and podlib.is_ready(by_index[j]) for j in range(i)
            ):
                break
            pod_name = f"{name}-{i}"
            labels = {
                "controller-revision-hash": revision,
                "statefulset.kubernetes.io/pod-name": pod_name,
                "apps.kubernetes.io/pod-index": str(i),
            }
            by_index[i] = self._create(s, pod_name, labels, now)
            due = min(due, self._ready_at.get(by_index[i]["metadata"]["uid"], math.inf))
        status = workload_status.statefulset(s, list(by_index.values()), revision)
        self._write_status("statefulsets", s, status)
        return due

    # -- daemonsets ------------------------------------------------------

    def _daemonset(self, ds: dict[str, Any], pods: list[dict[str, Any]], now: float) -> float:
        wanted = dslib.wanted_nodes(ds, self._all_nodes)
        pods, due = self._advance(ds, pods, now)
        kept: list[dict[str, Any]] = []
        for pod in pods:
            if dslib.pod_node(pod) in wanted and dslib.pod_node(pod) not in {
                dslib.pod_node(k) for k in kept
            }:
                kept.append(pod)
            else:
                self._delete(pod)
        name = ds["metadata"]["name"]
        for node in sorted(set(wanted) - {dslib.pod_node(p) for p in kept}):
            body = podlib.new_pod(ds, f"{name}-{random_suffix()}", {}, node)
            pod = self._store.create("pods", body)
            self._ready_at[pod["metadata"]["uid"]] = now + self._workload_delay(ds)
            kept.append(self._set_pod_status(pod, ready=False))
            due = min(due, self._ready_at[pod["metadata"]["uid"]])
        self._write_status("daemonsets", ds, dslib.status(ds, wanted, kept))
        return due

    def _write_status(self, resource: str, w: dict[str, Any], status: dict[str, Any]) -> None:
        if w.get("status") == status:
            return
        m = w["metadata"]
        self._store.patch(
            resource,
            m["namespace"],
            m["name"],
            lambda o: {**o, "status": status},
            subresource="status",
        )
