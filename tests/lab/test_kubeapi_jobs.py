"""batch/v1 Jobs on the lab's API server: the official client and kubectl see a Job run
to completion or failure, its pod scheduled where it fits (or Pending, Unschedulable, as
Kubernetes says it), its log, its deadline and backoff limit, and its pods deleted with it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from drills_lab import topology
from drills_lab.kubeapi import KubeApiServer
from drills_lab.kubeapi.controller import RolloutController
from drills_lab.kubeapi.jobs import JobController
from drills_lab.kubeapi.podrun import (
    EXIT_CODE_ANNOTATION,
    LOG_ANNOTATION,
    RUN_SECONDS_ANNOTATION,
    LogBook,
    Runners,
)
from drills_lab.kubeapi.store import ResourceStore
from drills_lab.seed_cluster import node

TOKEN = "jobs-test-token"
GPU_POOL = topology.NodePool("gpu-t", 2, 8, "96", "1024Gi")
CPU_POOL = topology.NodePool("cpu-t", 1, 0, "64", "256Gi")
TOLERATE_GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _seed_nodes(server: KubeApiServer) -> None:
    shape = topology.SITES["dr"]
    for pool in (GPU_POOL, CPU_POOL):
        for i in range(pool.count):
            server.store.create("nodes", node(pool, i, shape, "dr"))


@pytest.fixture(scope="module")
def jobs_server() -> Iterator[KubeApiServer]:
    """A server of its own, with two tainted 8-GPU nodes and one CPU node."""
    server = KubeApiServer(token=TOKEN, ready_delay=0.1, name="jobs", tls=True)
    server.start()
    _seed_nodes(server)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def api(jobs_server: KubeApiServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    cfg = client.Configuration()
    cfg.host = jobs_server.url
    cfg.api_key = {"BearerToken": TOKEN}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    ca = tmp_path_factory.mktemp("jobs-ca") / "ca.pem"
    ca.write_bytes(jobs_server.ca_pem or b"")
    cfg.ssl_ca_cert = str(ca)
    api = client.ApiClient(cfg)
    yield api
    api.close()


@pytest.fixture
def namespace(jobs_server: KubeApiServer) -> str:
    name = f"j-{uuid.uuid4().hex[:8]}"
    jobs_server.store.create("namespaces", {"metadata": {"name": name}})
    return name


def job_body(
    name: str,
    *,
    gpus: int = 0,
    exit_code: int = 0,
    seconds: float = 0.0,
    backoff: int = 0,
    deadline: int | None = None,
    tolerate: bool = True,
    selector: dict[str, str] | None = None,
    log: str = "",
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "work", "image": "registry.lab/tools/work:1"}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    pod: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if tolerate:
        pod["tolerations"] = [TOLERATE_GPU]
    if selector:
        pod["nodeSelector"] = selector
    annotations = {EXIT_CODE_ANNOTATION: str(exit_code), RUN_SECONDS_ANNOTATION: str(seconds)}
    if log:
        annotations[LOG_ANNOTATION] = log
    spec: dict[str, Any] = {
        "backoffLimit": backoff,
        "template": {"metadata": {"annotations": annotations}, "spec": pod},
    }
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def wait_job(api: Any, namespace: str, name: str, timeout: float = 15) -> Any:
    """The Job once it has a Complete or Failed condition."""
    batch = client.BatchV1Api(api)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        job = batch.read_namespaced_job(name, namespace)
        if any(c.status == "True" for c in job.status.conditions or []):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {name} did not finish in {timeout}s: {job.status}")


def pods_of(api: Any, namespace: str, name: str) -> list[Any]:
    core = client.CoreV1Api(api)
    return core.list_namespaced_pod(namespace, label_selector=f"job-name={name}").items


def test_a_job_runs_to_completion_on_a_gpu_node_with_its_log(api: Any, namespace: str) -> None:
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    batch.create_namespaced_job(namespace, job_body("ok", gpus=2, log="step 1\nstep 2"))
    job = wait_job(api, namespace, "ok")
    assert [(c.type, c.status) for c in job.status.conditions] == [("Complete", "True")]
    assert job.status.succeeded == 1 and not job.status.failed and not job.status.active
    assert job.status.start_time <= job.status.completion_time
    [pod] = pods_of(api, namespace, "ok")
    assert pod.status.phase == "Succeeded"
    assert pod.spec.node_name.startswith("gpu-t-")  # the GPUs are only there
    assert pod.status.container_statuses[0].state.terminated.exit_code == 0
    assert pod.metadata.owner_references[0].kind == "Job"
    text = core.read_namespaced_pod_log(pod.metadata.name, namespace)
    assert "step 1\nstep 2\n" in text and text.endswith("exit code 0\n")
    tail = core.read_namespaced_pod_log(pod.metadata.name, namespace, tail_lines=1)
    assert tail == "exit code 0\n"
    listed = batch.list_namespaced_job(namespace).items
    assert [j.metadata.name for j in listed] == ["ok"]


def test_a_failing_job_is_retried_up_to_its_backoff_limit(api: Any, namespace: str) -> None:
    client.BatchV1Api(api).create_namespaced_job(namespace, job_body("bad", exit_code=3, backoff=1))
    job = wait_job(api, namespace, "bad")
    failed = [c for c in job.status.conditions if c.type == "Failed"]
    assert failed and failed[0].reason == "BackoffLimitExceeded"
    assert job.status.failed == 2 and not job.status.succeeded
    assert job.status.completion_time is None  # only a Job that succeeded has one
    pods = pods_of(api, namespace, "bad")
    assert [p.status.phase for p in pods] == ["Failed", "Failed"]
    assert {p.status.container_statuses[0].state.terminated.exit_code for p in pods} == {3}


def test_a_job_past_its_active_deadline_fails_and_its_pod_goes(api: Any, namespace: str) -> None:
    body = job_body("slow", seconds=30, deadline=1)
    client.BatchV1Api(api).create_namespaced_job(namespace, body)
    job = wait_job(api, namespace, "slow", timeout=10)
    assert [c.reason for c in job.status.conditions if c.type == "Failed"] == ["DeadlineExceeded"]
    deadline = time.monotonic() + 5
    while pods_of(api, namespace, "slow") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pods_of(api, namespace, "slow") == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (job_body("big", gpus=9), "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."),
        (job_body("untolerated", gpus=1, tolerate=False), "0/3 nodes are available: "
         "1 Insufficient nvidia.com/gpu, 2 node(s) had untolerated taint "
         "{nvidia.com/gpu: present}."),
        (job_body("elsewhere", selector={"pool": "none"}), "0/3 nodes are available: "
         "3 node(s) didn't match Pod's node affinity/selector."),
    ],
)  # fmt: skip
def test_a_pod_that_fits_no_node_stays_pending_unschedulable(
    api: Any, namespace: str, body: dict[str, Any], message: str
) -> None:
    client.BatchV1Api(api).create_namespaced_job(namespace, body)
    name = body["metadata"]["name"]
    deadline = time.monotonic() + 5
    while not pods_of(api, namespace, name) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    [pod] = pods_of(api, namespace, name)
    assert pod.status.phase == "Pending" and pod.spec.node_name is None
    [scheduled] = pod.status.conditions
    assert (scheduled.type, scheduled.status, scheduled.reason) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )
    assert scheduled.message == message
    job = client.BatchV1Api(api).read_namespaced_job(name, namespace)
    assert job.status.active == 1 and not job.status.conditions


def _until(what: str, found: Callable[[], Any], timeout: float = 15) -> Any:
    end = time.monotonic() + timeout
    while not (value := found()):
        assert time.monotonic() < end, f"not within {timeout}s: {what}"
        time.sleep(0.05)
    return value


def test_gpus_held_by_running_pods_are_not_free(api: Any, namespace: str) -> None:
    batch = client.BatchV1Api(api)
    for i in range(2):  # 7 of 8 GPUs on each GPU node, held until they are deleted
        batch.create_namespaced_job(namespace, job_body(f"hold-{i}", gpus=7, seconds=300))
    for i in range(2):
        _until(f"hold-{i} runs", lambda i=i: [
            p for p in pods_of(api, namespace, f"hold-{i}") if p.status.phase == "Running"
        ])  # fmt: skip
    batch.create_namespaced_job(namespace, job_body("two", gpus=2))
    [pod] = _until("two has a pod the scheduler has judged", lambda: [
        p for p in pods_of(api, namespace, "two") if p.status.conditions
    ])  # fmt: skip
    assert pod.status.phase == "Pending", "2 GPUs fit nowhere while 7 of 8 are held on each"
    assert pod.status.conditions[0].message.endswith(": 3 Insufficient nvidia.com/gpu.")
    for i in range(2):  # the holders end: it fits then
        batch.delete_namespaced_job(f"hold-{i}", namespace, propagation_policy="Background")
    job = wait_job(api, namespace, "two", timeout=30)
    assert job.status.succeeded == 1


def test_deleting_a_job_in_the_background_deletes_its_pods(api: Any, namespace: str) -> None:
    batch = client.BatchV1Api(api)
    batch.create_namespaced_job(namespace, job_body("gone", seconds=30))
    deadline = time.monotonic() + 5
    while not pods_of(api, namespace, "gone") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pods_of(api, namespace, "gone")
    batch.delete_namespaced_job("gone", namespace, propagation_policy="Background")
    while pods_of(api, namespace, "gone") and time.monotonic() < deadline + 5:
        time.sleep(0.05)
    assert pods_of(api, namespace, "gone") == []
    assert batch.list_namespaced_job(namespace).items == []


def test_a_watch_sees_the_job_finish(api: Any, namespace: str) -> None:
    batch = client.BatchV1Api(api)
    batch.create_namespaced_job(namespace, job_body("watched", seconds=0.3))
    seen: list[str] = []
    for event in watch.Watch().stream(batch.list_namespaced_job, namespace, timeout_seconds=10):
        conditions = event["object"].status.conditions or []
        seen += [c.type for c in conditions if c.status == "True"]
        if seen:
            break
    assert seen == ["Complete"]


def test_kubectl_runs_waits_for_and_reads_the_log_of_a_job(
    jobs_server: KubeApiServer, kubectl_for: Callable[..., Any], namespace: str, tmp_path: Path
) -> None:
    kubectl = kubectl_for(jobs_server, tmp_path / "home", token=TOKEN)
    body = json.dumps(job_body("cli", log="hello from the job"))
    created = kubectl("-n", namespace, "create", "-f", "-", stdin=body)
    assert created.returncode == 0, created.stderr
    waited = kubectl(
        "-n", namespace, "wait", "--for=condition=complete", "job/cli", "--timeout=15s"
    )
    assert waited.returncode == 0, waited.stderr
    listed = kubectl("-n", namespace, "get", "jobs")
    assert listed.returncode == 0 and "cli" in listed.stdout, listed.stderr
    pod = kubectl("-n", namespace, "get", "pods", "-l", "job-name=cli", "-o", "name")
    logs = kubectl("-n", namespace, "logs", pod.stdout.strip())
    assert logs.returncode == 0, logs.stderr
    assert "hello from the job" in logs.stdout
    deleted = kubectl("-n", namespace, "delete", "job", "cli")
    assert deleted.returncode == 0, deleted.stderr
    assert kubectl("-n", namespace, "get", "job", "cli").returncode != 0


def create_in_one_pass(store: ResourceStore, resource: str, body: dict[str, Any]) -> None:
    """``body`` in the namespace of the tests that drive one reconcile pass by hand."""
    if store.get("namespaces", None, "one-pass") is None:
        store.create("namespaces", {"metadata": {"name": "one-pass"}})
    store.create(resource, {**body, "metadata": {**body["metadata"], "namespace": "one-pass"}})


def test_two_jobs_synced_in_one_pass_are_not_given_the_same_gpus() -> None:
    """Found when a pass bound two 7-GPU holders to one 8-GPU node (it had not seen its own
    first binding), so a third Job fitted on the node left empty."""
    store = ResourceStore()
    shape = topology.SITES["dr"]
    nodes = [store.create("nodes", node(GPU_POOL, i, shape, "dr")) for i in range(2)]
    for i in range(2):
        create_in_one_pass(store, "jobs", job_body(f"hold-{i}", gpus=7, seconds=300))
    jobs = JobController(store, ready_delay=60, runners=Runners(), logs=LogBook())
    try:
        jobs.reconcile(time.monotonic(), store.list("pods"), nodes)
    finally:
        jobs.stop()
    bound = sorted(p["spec"].get("nodeName") or "" for p in store.list("pods", "one-pass"))
    assert bound == ["gpu-t-0", "gpu-t-1"]


def test_a_job_synced_after_a_deployment_in_one_pass_sees_the_gpus_it_took() -> None:
    """The Deployment's pod is bound earlier in the same pass than the Job's: the Job's
    pod must not be given the GPUs that pod took."""
    store = ResourceStore()
    store.create("nodes", node(GPU_POOL, 0, topology.SITES["dr"], "dr"))
    template = job_body("x", gpus=7)["spec"]["template"]
    template["metadata"]["labels"] = {"app": "server"}
    create_in_one_pass(store, "deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "server"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "server"}},
                 "template": template},
    })  # fmt: skip
    create_in_one_pass(store, "jobs", job_body("two", gpus=2))
    jobs = JobController(store, ready_delay=60, runners=Runners(), logs=LogBook())
    try:
        RolloutController(store, ready_delay=60, name="one-pass", jobs=jobs).reconcile()
    finally:
        jobs.stop()
    [server] = [p for p in store.list("pods") if p["metadata"]["name"].startswith("server-")]
    assert server["spec"]["nodeName"] == "gpu-t-0"
    [job_pod] = [p for p in store.list("pods") if p["metadata"]["name"].startswith("two-")]
    assert job_pod["spec"].get("nodeName") is None, "7 of 8 GPUs are the Deployment's"
    assert job_pod["status"]["conditions"][0]["reason"] == "Unschedulable"
