"""Validation jobs in a drill on the lab: the trainer resumes from DR's newest checkpoint
and writes the next one there; a driver mismatch fails the drill, which rolls back with no
Job left; a crashed run's Job is deleted by `drills recover`; an incident runs only the
jobs marked for it, after its RTO."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from drills.plan import DrillPlan
from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus, Verdict
from drills.takeover.drill import Drill, DrillRequest, DrillResult
from drills.takeover.validation_jobs import waiting_on
from drills.targets.kube import jobs as kube_jobs
from drills.targets.sites import Targets
from drills_lab import topology
from drills_lab.kubeapi.podrun import RUN_SECONDS_ANNOTATION as RUN_SECONDS
from drills_lab.runtime import LabInfo
from drills_lab.trainer_job import CHECKPOINTS
from tests.support.drill import back_to_normal, drills_cli, lab_plan, lab_plan_file, snapshot
from tests.support.services import own_lab

JOB = topology.TRAINER_JOB
NAMESPACE = "training"


@pytest.fixture(scope="module")
def jobs_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    """A lab of its own: each test's drill changes it and must put it back."""
    yield from _lab(tmp_path_factory, drift_training=False)


@pytest.fixture(scope="module")
def training_drift_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    """A lab up with `--drift-training`: the trainer's tag at DR fails its driver check."""
    yield from _lab(tmp_path_factory, drift_training=True)


def _lab(factory: pytest.TempPathFactory, *, drift_training: bool) -> Iterator[LabInfo]:
    name = "training-drift-lab" if drift_training else "jobs-lab"
    with own_lab(factory, name, drift_training=drift_training, ready_delay=0.2) as info:
        yield info


def _before(info: LabInfo, tmp_path: Path, change: Any = None) -> tuple[DrillPlan, Any, str]:
    """The plan (changed by ``change``), the state before the run, and a fresh store's URL."""
    plan = lab_plan(info, change)
    return plan, snapshot(plan), f"sqlite:///{tmp_path / 'history.db'}"


def drill(plan: DrillPlan, db: str, **kwargs: Any) -> DrillResult:
    request = DrillRequest(plan, operator="tests", reason="ci", tier_deadline_s=20, **kwargs)
    return Drill(request, HistoryStore(db)).run()


def dr_checkpoints(info: LabInfo) -> list[str]:
    """The checkpoint keys at DR, read from moto as any S3 client reads them."""
    aws = Path(info.state_dir) / "aws"
    s3 = boto3.client(
        "s3", endpoint_url=info.moto, region_name=topology.DR_REGION,
        aws_access_key_id=(aws / "access_key_id").read_text().strip(),
        aws_secret_access_key=(aws / "secret_access_key").read_text().strip(),
    )  # fmt: skip
    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=CHECKPOINTS.dr_bucket, Prefix=CHECKPOINTS.prefix
    )
    return sorted(o["Key"] for page in pages for o in page.get("Contents") or [])


def job_left(plan: DrillPlan) -> tuple[bool, int]:
    """Whether the Job still exists at DR, and how many pods it has there."""
    with Targets(plan) as targets:
        kube = targets.dr.kube
        found = kube_jobs.job(kube, NAMESPACE, JOB) is not None
        return found, len(kube_jobs.job_pods(kube, NAMESPACE, JOB))


def test_a_drill_runs_the_trainer_at_dr_which_writes_the_next_checkpoint(
    jobs_lab: LabInfo, tmp_path: Path
) -> None:
    checkpoints = dr_checkpoints(jobs_lab)
    plan, before, db = _before(jobs_lab, tmp_path)
    result = drill(plan, db)
    assert (result.status, result.verdict) == (RunStatus.SUCCEEDED, Verdict.MET), result.error
    stored = HistoryStore(db).get_run(result.run_id)
    assert stored is not None
    [job] = stored.details.validation_jobs
    assert job.verdict == "succeeded" and job.deleted, job
    assert job.node is not None and job.node.startswith("gpu-b-")
    assert job.gpu_labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert job.gpu_labels["nvidia.com/cuda.driver.major"] == "550"
    newest = max(checkpoints)
    step = int(newest.split("step-")[1].split("/")[0]) + topology.TRAINER_JOB_STEPS
    written = f"{CHECKPOINTS.prefix}step-{step:06d}/model.safetensors"
    assert job.output == f"s3://{CHECKPOINTS.dr_bucket}/{written}"
    assert written in dr_checkpoints(jobs_lab)  # really there, in moto
    assert f"resumed from s3://{CHECKPOINTS.dr_bucket}/{newest} (step" in "\n".join(job.log_tail)
    assert job.log_tail[-1] == f"wrote s3://{CHECKPOINTS.dr_bucket}/{written}"
    # Started once the critical tier was ready, waited for after full capacity: the RTO
    # (the smoke) never waited for it.
    phases = {p.name: p for p in result.timeline.phases}
    bring_up_ended = phases["bring-up"].ended_at
    assert job.started_at is not None and bring_up_ended is not None
    assert bring_up_ended <= job.started_at
    assert [p.name for p in result.timeline.phases].index("validation jobs") == [
        p.name for p in result.timeline.phases
    ].index("full-capacity") + 1
    assert snapshot(plan) == before  # the Job is part of it: none before, none after
    assert job_left(plan) == (False, 0)

    history = drills_cli("history", "--json", db=db)
    [row] = json.loads(history.stdout)
    assert row["validation_jobs"][0]["output"] == job.output
    report = drills_cli("report", result.run_id, "--format", "json", db=db)
    assert json.loads(report.stdout)["validation_jobs"][0]["verdict"] == "succeeded"
    markdown = drills_cli("report", result.run_id, "--format", "markdown", db=db).stdout
    assert "## Validation jobs at DR" in markdown and f"`{written}`" not in markdown
    assert f"s3://{CHECKPOINTS.dr_bucket}/{written}" in markdown


def test_a_driver_mismatch_at_dr_fails_the_drill_which_rolls_back_with_no_job_left(
    training_drift_lab: LabInfo, tmp_path: Path
) -> None:
    plan, before, db = _before(training_drift_lab, tmp_path)
    result = drill(plan, db)
    assert (result.status, result.verdict) == (RunStatus.ROLLED_BACK, Verdict.NOT_MET)
    assert result.error is not None and "trainer-resume failed" in result.error
    mismatch = "CUDA 12.8 needs driver >= 570, node has 550"
    assert mismatch in result.error
    stored = HistoryStore(db).get_run(result.run_id)
    assert stored is not None
    [job] = stored.details.validation_jobs
    assert job.verdict == "failed" and job.deleted
    assert job.log_tail[-1] == f"driver check failed: {mismatch}"
    assert f":{topology.DRIFT_TRAINER_TAG} on gpu-b-" in job.log_tail[0]
    assert result.drift == {}  # compared with the snapshot: identical
    assert snapshot(plan) == before
    assert job_left(plan) == (False, 0)


def test_recover_deletes_the_job_of_a_drill_killed_while_it_ran(
    jobs_lab: LabInfo, tmp_path: Path
) -> None:
    slow = _slow_job(seconds=30)
    plan_file = lab_plan_file(jobs_lab, slow)
    plan = lab_plan(jobs_lab, slow)
    before = snapshot(plan)
    db = f"sqlite:///{tmp_path / 'history.db'}"
    crash_at = f"job.run dr/{NAMESPACE}/{JOB} written"
    killed = drills_cli("run", str(plan_file), "--yes", "--tier-deadline", "20", db=db,
                        crash_at=crash_at)  # fmt: skip
    assert killed.returncode == -9, killed.stdout[-800:] + killed.stderr[-800:]
    assert job_left(plan)[0], "the crash left the Job running at DR"
    recovered = drills_cli("recover", "--plan", plan.name, db=db)
    assert recovered.returncode == 0, recovered.stdout[-800:] + recovered.stderr[-800:]
    assert snapshot(plan) == before
    assert not job_left(plan)[0]
    _wait_for(lambda: job_left(plan) == (False, 0))  # its pods go behind it


def test_an_incident_runs_only_its_jobs_and_after_its_rto(
    jobs_lab: LabInfo, tmp_path: Path
) -> None:
    def change(data: dict[str, Any]) -> None:
        _slow_job(seconds=2)(data)
        job = data["validation_jobs"][0]
        job["in_incident"] = True
        data["validation_jobs"].append({**job, "name": "drill-only", "in_incident": False})

    plan = lab_plan(jobs_lab, change)
    db = f"sqlite:///{tmp_path / 'history.db'}"
    history = HistoryStore(db)
    result = drill(plan, db, mode=Mode.INCIDENT)
    try:
        assert result.status == RunStatus.SUCCEEDED, result.error
        stored = history.get_run(result.run_id)
        assert stored is not None and stored.restored_at is not None
        [job] = stored.details.validation_jobs
        assert job.name == JOB and job.verdict == "succeeded" and job.deleted
        assert job.started_at is not None and stored.restored_at < job.started_at
        names = [p.name for p in result.timeline.phases]
        assert names.index("measure") < names.index("validation jobs")
        # Its RTO never waited on the job: it ends where service was restored, before the
        # job (which ran its 2 s) started.
        assert job.duration_seconds is not None and job.duration_seconds >= 2
        assert result.measurement is not None and stored.t0 is not None
        restored_s = (stored.restored_at - stored.t0).total_seconds()
        assert result.measurement.rto_seconds == pytest.approx(restored_s, abs=0.01)
    finally:
        back_to_normal(plan, history, result.run_id)
    assert job_left(plan) == (False, 0)


def _slow_job(seconds: float) -> Any:
    """A plan change: the validation job runs a plain image for ``seconds``."""

    def change(data: dict[str, Any]) -> None:
        job = data["validation_jobs"][0]
        template = job["manifest"]["spec"]["template"]
        template["metadata"] = {"annotations": {RUN_SECONDS: str(seconds)}}
        template["spec"]["containers"][0]["image"] = "registry.lab/tools/sleep:1"
        job.pop("output", None)

    return change


def _wait_for(test: Any, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not test():
        assert time.monotonic() < end, "not so after 10 s"
        time.sleep(0.1)


def test_a_job_that_fits_no_node_at_dr_passes_its_deadline_and_the_drill_rolls_back(
    jobs_lab: LabInfo, tmp_path: Path
) -> None:
    def change(data: dict[str, Any]) -> None:
        job = data["validation_jobs"][0]
        job["deadline"] = "6s"  # long enough to see the pod Pending, even on a busy host
        container = job["manifest"]["spec"]["template"]["spec"]["containers"][0]
        container["resources"] = {"limits": {"nvidia.com/gpu": 99}}

    plan, before, db = _before(jobs_lab, tmp_path, change)
    result = drill(plan, db)
    assert (result.status, result.verdict) == (RunStatus.ROLLED_BACK, Verdict.NOT_MET)
    stored = HistoryStore(db).get_run(result.run_id)
    assert stored is not None
    [job] = stored.details.validation_jobs
    assert job.verdict == "deadline passed" and job.deleted and job.node is None
    # The scheduler's own words: why the pod stayed Pending.
    assert "Unschedulable: 0/5 nodes are available:" in job.reason
    assert "Insufficient nvidia.com/gpu" in job.reason
    assert snapshot(plan) == before
    _wait_for(lambda: job_left(plan) == (False, 0))


_PENDING = {
    "metadata": {"name": "trainer-resume-x"},
    "status": {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/5 nodes are available: 5 Insufficient nvidia.com/gpu."}
        ],
    },
}  # fmt: skip
_PLACED = {
    "metadata": {"name": "trainer-resume-y"},
    "spec": {"nodeName": "dr-gpu-0"},
    "status": {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]},
}


def test_what_a_job_waits_on_is_the_schedulers_word_and_outlives_its_deleted_pod() -> None:
    said = "Unschedulable: 0/5 nodes are available: 5 Insufficient nvidia.com/gpu."
    assert waiting_on([_PENDING], "") == said
    # At the cluster's own deadline the pod is deleted before the Job is marked failed: the
    # poll between the two reads no pod, and the reason stays (run C17 lost it).
    assert waiting_on([], said) == said
    # A pod that was placed no longer waits on the scheduler.
    assert waiting_on([_PLACED], said) == ""
    assert waiting_on([], "") == ""
