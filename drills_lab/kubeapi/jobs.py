"""batch/v1 Jobs: the Job controller, the scheduler and the kubelet for their pods.

A Job gets one pod at a time (``parallelism`` and ``completions`` of 1, what
drills runs); the pod is bound to a node it fits (:mod:`scheduler`) or stays
Pending with ``PodScheduled=False``/``Unschedulable``; once bound it starts
after the server's ready delay, runs through its image's runner (:mod:`podrun`)
in a thread of its own, and ends Succeeded or Failed. The Job's status follows
its pods as the real controller reports it: ``startTime``, ``active``,
``succeeded``, ``failed``, and ``Complete`` or ``Failed`` (``BackoffLimitExceeded``,
``DeadlineExceeded`` past ``activeDeadlineSeconds``) with ``completionTime``.
Pods whose Job is gone are deleted, as the garbage collector does after a delete
with ``propagationPolicy: Background``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import math
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from drills_lab.kubeapi import pods as podlib
from drills_lab.kubeapi.objects import condition, dig, now_rfc3339, parse_rfc3339
from drills_lab.kubeapi.podrun import LogBook, PodRun, Runners
from drills_lab.kubeapi.scheduler import place
from drills_lab.kubeapi.status import ApiError
from drills_lab.kubeapi.store import ResourceStore
from drills_lab.kubeapi.strategy import random_suffix

log = logging.getLogger("drills_lab.kubeapi.jobs")

_DONE = ("Succeeded", "Failed")
_UNSCHEDULABLE_RETRY_S = 0.5  # capacity may free up: look for a node again


def finished(job: dict[str, Any]) -> str | None:
    """ "Complete" or "Failed" once the Job has ended, else None."""
    for kind in ("Complete", "Failed"):
        found = condition(job, kind)
        if found is not None and found.get("status") == "True":
            return kind
    return None


def _condition(kind: str, reason: str = "", message: str = "") -> dict[str, Any]:
    now = now_rfc3339()
    c = {"type": kind, "status": "True", "lastProbeTime": now, "lastTransitionTime": now}
    return c | ({"reason": reason, "message": message} if reason else {})


@dataclass(frozen=True)
class _Pass:
    """What one reconcile pass sees: the time, every node, every pod.

    The pass keeps ``pods`` current with what it creates and binds itself, as
    kube-scheduler's cache assumes a pod on its node the moment it binds it: two Jobs
    synced in one pass must not both be given the same free GPUs.
    """

    now: float
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]

    def assume(self, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        self.pods[:] = [p for p in self.pods if p["metadata"]["uid"] != uid] + [pod]


class JobController:
    def __init__(
        self, store: ResourceStore, ready_delay: float, runners: Runners, logs: LogBook
    ) -> None:
        self._store = store
        self._delay = ready_delay
        self._runners = runners
        self._logs = logs
        self._start_at: dict[str, float] = {}  # pod uid -> when its container starts
        self._running: dict[str, Future[PodRun]] = {}
        self._pool = ThreadPoolExecutor(4, "lab-job-pods")

    def stop(self) -> None:
        # A server started again later runs pods again: a fresh pool (its threads start lazily).
        pool, self._pool = self._pool, ThreadPoolExecutor(4, "lab-job-pods")
        pool.shutdown(wait=False, cancel_futures=True)

    def reconcile(
        self, now: float, pods: list[dict[str, Any]], nodes: list[dict[str, Any]]
    ) -> float:
        """One pass over every Job and its pods; the monotonic time of the next timer."""
        jobs = {j["metadata"]["uid"]: j for j in self._store.list("jobs")}
        owned: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            uid = podlib.owner_uid(pod, ("Job",))
            if uid is None:
                continue
            if uid not in jobs:
                self._delete(pod)  # its Job was deleted: the garbage collector's part
                continue
            owned.setdefault(uid, []).append(pod)
        due = math.inf
        seen = _Pass(now, nodes, list(pods))
        for uid, job in jobs.items():
            try:
                due = min(due, self._sync(job, owned.get(uid, []), seen))
            except ApiError as exc:
                log.debug("sync of job %s failed: %s", job["metadata"]["name"], exc.reason)
                due = min(due, now + 0.05)
        return due

    # -- one Job -----------------------------------------------------------------

    def _sync(self, job: dict[str, Any], mine: list[dict[str, Any]], seen: _Pass) -> float:
        now = seen.now
        if finished(job):
            for pod in mine:
                if dig(pod, "status", "phase") not in _DONE:
                    self._delete(pod)
            return math.inf
        due = math.inf
        mine = [self._step(p, seen) for p in mine]
        due = min([due, *(self._due(p, now) for p in mine)])
        status = self._status(job, mine)
        if finished({"status": status}) is None and not status.get("active"):
            pod = podlib.new_pod(job, f"{job['metadata']['name']}-{random_suffix()}", {}, None)
            created = self._store.create("pods", pod)
            seen.assume(created)
            self._step(created, seen)
            status["active"] = 1
            due = min(due, now + _UNSCHEDULABLE_RETRY_S)
        deadline = self._deadline_left(job)
        if deadline is not None:
            due = min(due, now + max(deadline, 0.0))
        if job.get("status") != status:
            m = job["metadata"]
            self._store.patch(
                "jobs", m["namespace"], m["name"], lambda o: {**o, "status": status},
                subresource="status",
            )  # fmt: skip
        return due

    def _due(self, pod: dict[str, Any], now: float) -> float:
        uid = pod["metadata"]["uid"]
        if uid in self._running:
            return now + 0.05  # its runner is at work: look again soon
        if uid in self._start_at:
            return self._start_at[uid]
        if not dig(pod, "spec", "nodeName") and dig(pod, "status", "phase") not in _DONE:
            return now + _UNSCHEDULABLE_RETRY_S
        return math.inf

    def _deadline_left(self, job: dict[str, Any]) -> float | None:
        limit = dig(job, "spec", "activeDeadlineSeconds")
        started = parse_rfc3339(dig(job, "status", "startTime"))
        if not isinstance(limit, int) or started is None:
            return None
        return (started + dt.timedelta(seconds=limit) - dt.datetime.now(dt.UTC)).total_seconds()

    def _status(self, job: dict[str, Any], mine: list[dict[str, Any]]) -> dict[str, Any]:
        old = job.get("status") or {}
        phases = [dig(p, "status", "phase") for p in mine]
        succeeded, failed = phases.count("Succeeded"), phases.count("Failed")
        active = len(mine) - succeeded - failed
        status: dict[str, Any] = {"startTime": old.get("startTime") or now_rfc3339()}
        status |= {k: v for k, v in (("active", active), ("succeeded", succeeded),
                                     ("failed", failed)) if v}  # fmt: skip
        status["ready"] = sum(map(podlib.is_ready, mine))
        status["uncountedTerminatedPods"] = {}
        status["conditions"] = list(old.get("conditions") or [])
        ended: dict[str, Any] | None = None
        left = self._deadline_left({**job, "status": status})
        if succeeded >= int(dig(job, "spec", "completions") or 1):
            ended = _condition("Complete")
        elif failed > int(dig(job, "spec", "backoffLimit") or 0):
            ended = _condition(
                "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"
            )
        elif left is not None and left <= 0:
            ended = _condition(
                "Failed", "DeadlineExceeded", "Job was active longer than specified deadline"
            )
            for pod in mine:
                if dig(pod, "status", "phase") not in _DONE:
                    self._delete(pod)
            status.pop("active", None)
        if ended is not None:
            status["conditions"].append(ended)
            if ended["type"] == "Complete":  # only a Job that succeeded has one
                status["completionTime"] = ended["lastTransitionTime"]
        return status

    # -- one pod: schedule, start, run, end --------------------------------------

    def _step(self, pod: dict[str, Any], seen: _Pass) -> dict[str, Any]:
        now, uid = seen.now, pod["metadata"]["uid"]
        phase = dig(pod, "status", "phase")
        if phase in _DONE:
            return pod
        if not dig(pod, "spec", "nodeName"):
            return self._schedule(pod, seen)
        future = self._running.get(uid)
        if future is not None:
            return self._end(pod, future.result()) if future.done() else pod
        start = self._start_at.get(uid)
        if start is not None and start <= now:
            self._start_at.pop(uid)
            bound_to = pod["spec"]["nodeName"]
            node = next((n for n in seen.nodes if n["metadata"]["name"] == bound_to), {})
            runner = self._runners.for_pod(pod)
            self._running[uid] = self._pool.submit(self._run, runner, pod, node)
            return self._set_status(pod, podlib.pod_status(pod, ready=True))
        return pod

    @staticmethod
    def _run(runner: Any, pod: dict[str, Any], node: dict[str, Any]) -> PodRun:
        try:
            result: PodRun = runner(pod, node)
            return result
        except Exception as exc:
            log.exception("runner of pod %s failed", pod["metadata"]["name"])
            return PodRun(1, [f"lab runner failed: {type(exc).__name__}: {exc}"])

    def _schedule(self, pod: dict[str, Any], seen: _Pass) -> dict[str, Any]:
        spec = pod.get("spec") or {}
        others = [p for p in seen.pods if p["metadata"]["uid"] != pod["metadata"]["uid"]]
        node, message = place(spec, seen.nodes, others)
        m = pod["metadata"]
        if node is None:
            status = {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False",
                                "lastProbeTime": None, "lastTransitionTime": now_rfc3339(),
                                "reason": "Unschedulable", "message": message}],
                "qosClass": "BestEffort",
            }  # fmt: skip
            old = dig(pod, "status", "conditions") or []
            if old and old[0].get("message") == message:
                return pod  # told already: no write, no event
            return self._set_status(pod, status)
        bound = self._store.patch(
            "pods", m["namespace"], m["name"],
            lambda p: {**p, "spec": {**p["spec"], "nodeName": node}},
        )  # fmt: skip
        self._start_at[bound["metadata"]["uid"]] = seen.now + self._delay
        bound = self._set_status(bound, podlib.pod_status(bound, ready=False))
        seen.assume(bound)
        return bound

    def _end(self, pod: dict[str, Any], run: PodRun) -> dict[str, Any]:
        uid = pod["metadata"]["uid"]
        self._running.pop(uid, None)
        m = pod["metadata"]
        self._logs.write(m["namespace"], m["name"], run.log)
        now = now_rfc3339()
        ok = run.exit_code == 0
        status = podlib.pod_status(pod, ready=False)
        status["phase"] = "Succeeded" if ok else "Failed"
        for c in status["conditions"]:
            if c["type"] in ("Ready", "ContainersReady"):
                c["reason"] = "PodCompleted" if ok else "PodFailed"
        for entry in status["containerStatuses"]:
            entry["state"] = {"terminated": {
                "exitCode": run.exit_code, "reason": "Completed" if ok else "Error",
                "startedAt": dig(pod, "status", "startTime") or now, "finishedAt": now,
            }}  # fmt: skip
        return self._set_status(pod, status)

    def _set_status(self, pod: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        m = pod["metadata"]
        return self._store.patch(
            "pods", m["namespace"], m["name"], lambda p: {**p, "status": status},
            subresource="status",
        )  # fmt: skip

    def _delete(self, pod: dict[str, Any]) -> None:
        m = pod["metadata"]
        with contextlib.suppress(ApiError):  # already gone: that was the goal
            self._store.delete("pods", m["namespace"], m["name"])
        self._start_at.pop(m["uid"], None)
        self._running.pop(m["uid"], None)
        self._logs.forget(m["namespace"], m["name"])
