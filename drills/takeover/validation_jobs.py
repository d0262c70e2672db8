"""The plan's validation jobs, run to completion at DR: proof that GPU work runs there.

A drill starts them as soon as its critical tier is ready, beside the normal tier, so
the RTO is measured as without them; it waits for them once it is at full capacity. Each
must succeed within its deadline and, where it names an ``output``, leave a new object
under that DR bucket and prefix. One that does not makes the drill fail, and it rolls
back. An incident runs those marked ``in_incident`` after its RTO is measured, reports
them, and never rolls back for them.

Each Job is created through the executor (change ``job.run``), so the journal knows of
it: a rollback, a failback or `drills recover` deletes it with the rest. Once its result
is read it is deleted at once, its pods with it.
"""

from __future__ import annotations

import contextvars
import copy
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import yaml

from drills.errors import DrillError, NotMet, StepFailed, TemporaryError
from drills.plan import DrillPlan
from drills.plan.files import read_regular_file
from drills.plan.models.validation_job_spec import ValidationJob, job_problems
from drills.store.details import ValidationJobRecord
from drills.takeover.steps.job_changes import KIND, job_address
from drills.takeover.steps.phases import PhaseContext
from drills.takeover.timeline import utc_now
from drills.targets.kube import jobs as kube_jobs

log = logging.getLogger("drills.takeover.validation_jobs")

POLL_S = 0.25
LOG_LINES = 20
MANIFEST_LIMIT = 1 << 20
RUN_LABEL = "drills.dev/run"
JOB_LABEL = "drills.dev/validation-job"


def job_manifest(plan: DrillPlan, job: ValidationJob, run_id: str) -> dict[str, Any]:
    """The Job to create: the plan's template, named and labelled for this run."""
    if job.manifest is not None:
        raw: Any = copy.deepcopy(job.manifest)
    else:
        assert job.manifest_file is not None
        path = plan.resolve_path(job.manifest_file)
        try:
            raw = yaml.safe_load(read_regular_file(path, MANIFEST_LIMIT))
        except (OSError, yaml.YAMLError) as exc:
            raise StepFailed(f"validation job {job.name}", f"cannot read {path}: {exc}") from exc
        problems = job_problems(raw)
        if problems:
            raise StepFailed(f"validation job {job.name}", f"{path}: {'; '.join(problems)}")
    raw["apiVersion"], raw["kind"] = "batch/v1", "Job"
    meta = raw.setdefault("metadata", {})
    meta.update(name=job.name, namespace=job.namespace)
    meta.setdefault("labels", {}).update({RUN_LABEL: run_id[:63], JOB_LABEL: job.name})
    # The cluster stops it at its deadline too, should drills itself be gone by then.
    raw["spec"].setdefault("activeDeadlineSeconds", math.ceil(job.deadline))
    return raw


def _ended(obj: dict[str, Any]) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return str(c["type"])
    return None


def _failure_reason(obj: dict[str, Any]) -> str:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Failed" and c.get("status") == "True":
            return f"{c.get('reason', 'Failed')}: {c.get('message', '')}".rstrip(": ")
    return "the Job failed"


def _unschedulable(pod: dict[str, Any]) -> str | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return f"{c.get('reason', 'Unschedulable')}: {c.get('message', '')}"
    return None


def waiting_on(pods: list[dict[str, Any]], before: str) -> str:
    """What the Job waits on, from its pods now and what it waited on ``before``.

    With no pod to read, it is what it was: at a deadline of its own (activeDeadlineSeconds,
    about when drills' falls) the cluster deletes the pods before it marks the Job failed, and
    the scheduler's reason must not be lost from the evidence in that moment."""
    if not pods:
        return before
    return next(filter(None, map(_unschedulable, pods)), "")


class JobRun:
    """One validation job at DR, from its creation to its deletion."""

    def __init__(self, ctx: PhaseContext, job: ValidationJob, run_id: str, stop: threading.Event):
        self.ctx, self.job, self.run_id, self.stop = ctx, job, run_id, stop
        self.kube = ctx.targets.dr.kube
        self.address = job_address("dr", job.namespace, job.name)
        self.record = ValidationJobRecord(name=job.name, namespace=job.namespace, verdict="error")

    def __call__(self) -> ValidationJobRecord:
        started = time.monotonic()
        self.record.started_at = utc_now()
        try:
            self._run(started + self.job.deadline)
        except DrillError as exc:
            self.record.verdict, self.record.reason = "error", str(exc)
        finally:
            self.record.duration_seconds = round(time.monotonic() - started, 3)
            self._delete()
        log.info("validation job %s: %s %s", self.job.name, self.record.verdict, self.record.reason)
        return self.record

    def _run(self, deadline: float) -> None:
        before = self._outputs()
        manifest = job_manifest(self.ctx.plan, self.job, self.run_id)
        if self.stop.is_set():  # the run stopped meanwhile: no Job to start, nor to delete
            raise StepFailed(f"validation job {self.job.name}", "not started: the run is stopping")
        self.ctx.executor.apply(KIND, self.address, {"present": True, "manifest": manifest})
        obj, waited_on = self._wait(deadline)
        self._describe_pod()
        # The cluster may stop it at the same deadline (activeDeadlineSeconds) first.
        if obj is None or _ended(obj) is None or _failure_reason(obj).startswith("DeadlineExc"):
            self.record.verdict = "deadline passed"
            self.record.reason = f"not finished after {self.job.deadline:g}s" + (
                f" ({waited_on})" if waited_on else ""
            )
            return
        if _ended(obj) == "Failed":
            # Its last words say why (a driver check, an unreadable checkpoint).
            said = f"; its log ends: {self.record.log_tail[-1]}" if self.record.log_tail else ""
            self.record.verdict, self.record.reason = "failed", _failure_reason(obj) + said
            return
        if self.job.output is not None:
            new = sorted(self._outputs() - before)
            if not new:
                out = self.job.output
                self.record.verdict = "no output"
                self.record.reason = f"no new object under s3://{out.bucket}/{out.prefix}"
                return
            self.record.output = f"s3://{self.job.output.bucket}/{new[-1][0]}"
        self.record.verdict = "succeeded"

    def _outputs(self) -> set[tuple[str, str]]:
        """(key, ETag) of each object under the output prefix at DR."""
        out = self.job.output
        if out is None:
            return set()
        return {
            (o.key, o.etag) for o in self.ctx.targets.dr.objects.objects(out.bucket, out.prefix)
        }

    def _wait(self, deadline: float) -> tuple[dict[str, Any] | None, str]:
        """The Job once it ended, or as it was at the deadline; what it waited on."""
        obj: dict[str, Any] | None = None
        waited_on = ""
        while True:
            try:
                obj = kube_jobs.job(self.kube, self.job.namespace, self.job.name)
                if obj is None:
                    raise StepFailed(f"validation job {self.job.name}", "the Job disappeared")
                if _ended(obj):
                    return obj, waited_on
                pods = kube_jobs.job_pods(self.kube, self.job.namespace, self.job.name)
                waited_on = waiting_on(pods, waited_on)
            except TemporaryError as exc:
                waited_on = str(exc)
            if time.monotonic() >= deadline:
                return obj, waited_on
            if self.stop.wait(POLL_S):
                raise StepFailed(f"validation job {self.job.name}", "stopped: the run is stopping")

    def _describe_pod(self) -> None:
        """The node its last pod ran on, that node's GPU labels, and the end of its log."""
        try:
            pods = kube_jobs.job_pods(self.kube, self.job.namespace, self.job.name)
            if not pods:
                return
            pod = pods[-1]
            node = (pod.get("spec") or {}).get("nodeName")
            if node:
                self.record.node = str(node)
                self.record.gpu_labels = kube_jobs.gpu_labels(self.kube, str(node))
            name = pod["metadata"]["name"]
            self.record.log_tail = kube_jobs.pod_log(self.kube, self.job.namespace, name, LOG_LINES)
        except DrillError as exc:  # what it tells is evidence; its absence is not a failure
            log.warning("validation job %s: pod not described: %s", self.job.name, exc)

    def _delete(self) -> None:
        """Delete the Job now, through the journal, so it is marked undone there."""
        try:
            self.ctx.executor.rollback(lambda c: c.kind == KIND and c.target == self.address)
            self.record.deleted = True
        except DrillError as exc:  # left in the journal: the rollback or recover deletes it
            log.error("validation job %s: not deleted: %s", self.job.name, exc)


class ValidationJobs:
    """The plan's validation jobs for one run, run beside the takeover in threads."""

    def __init__(self, ctx: PhaseContext, run_id: str, *, incident: bool) -> None:
        self.ctx = ctx
        self.run_id = run_id
        self.jobs = [j for j in ctx.plan.validation_jobs if j.in_incident or not incident]
        self._stop = threading.Event()
        self._pool: ThreadPoolExecutor | None = None
        self._futures: list[Future[ValidationJobRecord]] = []

    def start(self) -> None:
        if not self.jobs or self.ctx.dry_run or self._pool is not None:
            return
        self._pool = ThreadPoolExecutor(len(self.jobs), "validation-job")
        for job in self.jobs:
            run = JobRun(self.ctx, job, self.run_id, self._stop)
            # The caller's context (a Prefect flow run's logger) goes with each thread.
            self._futures.append(self._pool.submit(contextvars.copy_context().run, run))

    def stop(self) -> None:
        """The run is stopping: each job stops waiting, and deletes its Job."""
        self._stop.set()
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def finish(self, keep: Callable[[list[ValidationJobRecord]], None], *, judge: bool) -> None:
        """Wait for every job, record each in its step and through ``keep``; with
        ``judge``, a job that did not succeed fails the run (a drill rolls back)."""
        if not self.jobs or self.ctx.dry_run:
            return
        self.start()
        records = [f.result() for f in self._futures]
        keep(records)
        timeline = self.ctx.timeline
        for record in records:
            with timeline.step(f"validation job {record.namespace}/{record.name}") as step:
                step.evidence = record.model_dump(mode="json")
                step.result = record.verdict + (f": {record.reason}" if record.reason else "")
                if not record.passed:
                    step.status = "failed"
        failed = [f"{r.name} {r.verdict}: {r.reason}" for r in records if not r.passed]
        if failed and judge:
            raise NotMet("validation jobs", "; ".join(failed))


@contextmanager
def validation_jobs(ctx: PhaseContext, run_id: str, *, incident: bool) -> Iterator[ValidationJobs]:
    """The run's validation jobs, stopped (their Jobs deleted) however the run leaves."""
    jobs = ValidationJobs(ctx, run_id, incident=incident)
    try:
        yield jobs
    finally:
        jobs.stop()
