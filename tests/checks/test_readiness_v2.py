"""Readiness v2 on the lab: would the workloads actually schedule, and write, at DR?

The clean lab passes the seven checks; `--drift-scheduling` fails exactly the documented
ones; each check's other fail path is made on the drifted lab and put back."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
from kubernetes import client, config

from drills.checks.areas.canary import CANARY_PREFIX
from drills.checks.base import Status
from drills.plan import load_plan
from drills_lab import topology
from drills_lab.runtime import LabInfo
from tests.checks.test_readiness import drilled_recently, plan_path, readiness_cli
from tests.support.checks import (
    SCHEDULING_DRIFT_FAILURES,
    SCHEDULING_DRIFT_WARNINGS,
    V2_CHECKS,
    run_check,
)
from tests.support.drill import lab_plan


def _results(info: LabInfo, db: str) -> dict[str, dict[str, Any]]:
    drilled_recently(db, "lab")
    result = readiness_cli(plan_path(info), "--json", db=db)
    return {r["id"]: r for r in json.loads(result.stdout)["results"]}


def test_clean_lab_passes_the_seven_new_checks(lab: LabInfo, tmp_path: Path) -> None:
    results = _results(lab, f"sqlite:///{tmp_path / 'h.db'}")
    assert {c: results[c]["status"] for c in V2_CHECKS} == dict.fromkeys(V2_CHECKS, "pass")
    assert results["cluster.device_plugin"]["evidence"]["ready_on"] == 3
    assert results["cluster.queue_quota"]["evidence"]["queues"][0]["cohort"] == "gpu-pool"
    assert results["cluster.priority_classes"]["evidence"]["dr_values"]["drills-critical"] == (
        1_000_000
    )
    writes = results["data.dr_writable"]["evidence"]["buckets"]
    assert {b["bucket"] for b in writes} == {d.dr_bucket for d in topology.DATASETS}
    assert all(b["wrote"] and b["read_back"] and b["removed"] for b in writes)
    assert results["forecast.rto"]["status"] == "pass"
    assert "stated model" in results["forecast.rto"]["evidence"]["basis"]


def test_canary_leaves_nothing_behind(lab: LabInfo) -> None:
    plan = load_plan(plan_path(lab))
    assert run_check(plan, "data.dr_writable").status is Status.PASS
    s3 = boto3.client(
        "s3", endpoint_url=lab.moto, region_name=topology.DR_REGION,
        aws_access_key_id=_aws_key(lab)[0], aws_secret_access_key=_aws_key(lab)[1],
    )  # fmt: skip
    for d in topology.DATASETS:
        listing = s3.list_object_versions(Bucket=d.dr_bucket, Prefix=CANARY_PREFIX)
        assert not listing.get("Versions") and not listing.get("DeleteMarkers"), d.dr_bucket


def _aws_key(info: LabInfo) -> tuple[str, str]:
    aws = Path(info.state_dir) / "aws"
    return (
        (aws / "access_key_id").read_text().strip(),
        (aws / "secret_access_key").read_text().strip(),
    )


def test_canary_fails_and_blocks_on_a_bucket_dr_cannot_write(lab: LabInfo) -> None:
    def no_bucket(data: dict[str, Any]) -> None:
        data["datasets"][0]["dr_bucket"] = "no-such-dr-bucket"

    result = run_check(lab_plan(lab, no_bucket), "data.dr_writable")
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert "no-such-dr-bucket" in result.summary


def test_scheduling_drift_fails_exactly_the_documented_checks(
    scheduling_drift_lab: LabInfo, tmp_path: Path
) -> None:
    results = _results(scheduling_drift_lab, f"sqlite:///{tmp_path / 'h.db'}")
    failed = {i for i, r in results.items() if r["status"] in ("fail", "error")}
    warned = {i for i, r in results.items() if r["status"] == "warn"}
    assert failed == SCHEDULING_DRIFT_FAILURES, {i: r["summary"] for i, r in results.items()}
    assert warned == SCHEDULING_DRIFT_WARNINGS
    plugin = results["cluster.device_plugin"]
    assert plugin["evidence"]["sick"] == {"gpu-b-2": "plugin pod not Ready"}
    assert not plugin["blocking"]  # two healthy GPU nodes still hold the critical tier
    assert "serving-gpu" in results["cluster.queue_quota"]["summary"]
    assert results["cluster.queue_quota"]["blocking"]
    blocked = results["cluster.schedulable"]["evidence"]["blocked"]
    assert {b["workload"] for b in blocked} == {"serving/llm-server", "serving/embedding-server"}
    assert "taint dedicated=training:NoSchedule" in blocked[0]["excluded_by"]
    assert "drills-critical" in results["cluster.priority_classes"]["summary"]
    assert results["forecast.rto"]["evidence"]["completes"] is False


@contextmanager
def _dr_api(info: LabInfo) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(str(Path(info.state_dir) / "dr.kubeconfig"))
    try:
        yield api
    finally:
        api.close()


def test_resource_quota_fail_path(scheduling_drift_lab: LabInfo) -> None:
    plan = load_plan(plan_path(scheduling_drift_lab))
    assert run_check(plan, "cluster.resource_quota").status is Status.PASS
    with _dr_api(scheduling_drift_lab) as api:
        core = client.CoreV1Api(api)
        body = {"spec": {"hard": {"requests.nvidia.com/gpu": "2"}}}
        core.patch_namespaced_resource_quota("serving-quota", "serving", body)
        try:
            result = run_check(plan, "cluster.resource_quota")
        finally:
            body["spec"]["hard"]["requests.nvidia.com/gpu"] = "8"
            core.patch_namespaced_resource_quota("serving-quota", "serving", body)
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert result.evidence["short"][0]["resource"] == "requests.nvidia.com/gpu"


def test_sentinel_fail_path(scheduling_drift_lab: LabInfo) -> None:
    plan = load_plan(plan_path(scheduling_drift_lab))
    with _dr_api(scheduling_drift_lab) as api:
        apps = client.AppsV1Api(api)
        name, ns = topology.SENTINEL_NAME, topology.SENTINEL_NAMESPACE
        apps.patch_namespaced_deployment_scale(name, ns, {"spec": {"replicas": 0}})
        try:
            result = _wait_for(plan, "cluster.sentinel", Status.FAIL)
        finally:
            apps.patch_namespaced_deployment_scale(name, ns, {"spec": {"replicas": 1}})
        assert _wait_for(plan, "cluster.sentinel", Status.PASS).status is Status.PASS
    assert "no Ready replica" in result.summary and not result.blocking


def _wait_for(plan: Any, check: str, status: Status, tries: int = 40) -> Any:
    for _ in range(tries):
        result = run_check(plan, check)
        if result.status is status:
            return result
        time.sleep(0.1)
    return result


def test_a_plan_without_a_sentinel_passes_and_says_so(lab: LabInfo) -> None:
    def drop(data: dict[str, Any]) -> None:
        data.pop("sentinel", None)

    result = run_check(lab_plan(lab, drop), "cluster.sentinel")
    assert result.status is Status.PASS and "names no sentinel" in result.summary
