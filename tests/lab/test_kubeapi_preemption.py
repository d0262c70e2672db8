"""The lab scheduler's priority preemption and its Kueue model, observed through the
official Python client as a real cluster's would be: victims chosen and marked, the
preemptor nominated then bound, ``preemptionPolicy: Never`` waiting, and Kueue Workloads
admitted and evicted by quota and priority."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from kubernetes import client, watch
from urllib3.exceptions import ProtocolError

from drills_lab.kubeapi import KubeApiServer
from tests.lab.conftest import KUBE_TOKEN, kube_client
from tests.lab.test_kubeapi_controller import wait_for as controller_wait_for

T = TypeVar("T")
GPU = "nvidia.com/gpu"
KUEUE = ("kueue.x-k8s.io", "v1beta1")
NODE = "gpu-0"


def wait_for(check: Callable[[], T], what: str) -> T:
    """Longer than the controller tests' wait: preemption waits out a victim's grace."""
    return controller_wait_for(check, 10.0, what)


@pytest.fixture(scope="module")
def server() -> Iterator[KubeApiServer]:
    """A server of its own, with one 4-GPU node and three PriorityClasses."""
    server = KubeApiServer(token=KUBE_TOKEN, ready_delay=0.1, name="preempt")
    server.start()
    server.store.create(
        "nodes",
        {
            "metadata": {"name": NODE, "labels": {"nvidia.com/gpu.present": "true"}},
            "status": {
                "allocatable": {GPU: "4", "cpu": "64", "memory": "512Gi"},
                "capacity": {GPU: "4", "cpu": "64", "memory": "512Gi"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
    )
    for name, value, policy in (
        ("low", 100, "PreemptLowerPriority"),
        ("high", 10_000, "PreemptLowerPriority"),
        ("high-never", 10_000, "Never"),
    ):
        server.store.create(
            "priorityclasses",
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                "preemptionPolicy": policy,
            },
        )
    yield server
    server.stop()


@pytest.fixture
def api(server: KubeApiServer) -> Iterator[client.ApiClient]:
    with kube_client(server) as api:
        yield api


@pytest.fixture
def namespace(server: KubeApiServer) -> Iterator[str]:
    """A fresh namespace each test; removing it frees the node's GPUs for the next."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    server.store.create("namespaces", {"metadata": {"name": name}})
    yield name
    server.store.delete("namespaces", None, name)


def deployment(name: str, replicas: int, gpus: int, cls: str, queue: str | None = None) -> Any:
    labels = {"app": name}
    template_labels = {**labels, **({"kueue.x-k8s.io/queue-name": queue} if queue else {})}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": template_labels},
                "spec": {
                    "priorityClassName": cls,
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.test/work:1",
                            "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
                        }
                    ],
                },
            },
        },
    }


class PodEvents:
    """Every pod event of a namespace, watched from before the test acts."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.seen: list[tuple[str, client.V1Pod]] = []
        self._watch = watch.Watch()
        core = client.CoreV1Api(api)
        started = threading.Event()

        self._stopping = False

        def run() -> None:
            started.set()
            try:
                for event in self._watch.stream(
                    core.list_namespaced_pod, namespace, timeout_seconds=60
                ):
                    self.seen.append((event["type"], event["object"]))
            except ProtocolError:
                # The client closed under a stopped watch ends it so; any other end is wrong.
                if not self._stopping:
                    raise

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        started.wait(2)
        time.sleep(0.2)  # the watch's request is made

    def stop_after(self, check: Callable[[client.V1Pod], bool], what: str) -> None:
        """Stop once an event ``check`` accepts has come: a watch delivers in order, so every
        event before it has come too, however far the watch lagged behind the test."""
        wait_for(lambda: any(check(p) for _, p in list(self.seen)), what=what)
        self._stopping = True
        self._watch.stop()


def _conditions(pod: client.V1Pod) -> dict[str, Any]:
    return {c.type: c for c in pod.status.conditions or []}


def _app_pods(core: client.CoreV1Api, ns: str, app: str) -> list[client.V1Pod]:
    pods = core.list_namespaced_pod(ns, label_selector=f"app={app}").items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def _running(core: client.CoreV1Api, ns: str, app: str, n: int) -> list[client.V1Pod] | None:
    pods = [p for p in _app_pods(core, ns, app) if p.status.phase == "Running"]
    return pods if len(pods) == n else None


def test_a_higher_priority_pod_preempts_the_fewest_lower_ones_then_binds(
    api: client.ApiClient, namespace: str
) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    apps.create_namespaced_deployment(namespace, deployment("batch", 4, 1, "low"))
    batch = wait_for(lambda: _running(core, namespace, "batch", 4), what="4 batch pods running")
    assert all(p.spec.node_name == NODE and p.spec.priority == 100 for p in batch)
    assert all(p.spec.preemption_policy == "PreemptLowerPriority" for p in batch)

    events = PodEvents(api, namespace)
    apps.create_namespaced_deployment(namespace, deployment("critical", 1, 2, "high"))
    critical = wait_for(lambda: _running(core, namespace, "critical", 1), what="critical up")[0]
    events.stop_after(
        lambda p: p.metadata.name == critical.metadata.name and p.status.phase == "Running",
        what="the watch seeing the critical pod run",
    )

    assert critical.spec.node_name == NODE and critical.spec.priority == 10_000
    nominated = [
        p
        for _, p in events.seen
        if p.metadata.labels.get("app") == "critical"
        and p.status.nominated_node_name == NODE
        and not p.spec.node_name
    ]
    assert nominated, "the preemptor was never seen nominated to the node before binding"
    assert _conditions(nominated[0])["PodScheduled"].status == "False"
    victims = {p.metadata.name: p for _, p in events.seen if "DisruptionTarget" in _conditions(p)}
    by = {name: _conditions(p)["DisruptionTarget"].message for name, p in victims.items()}
    preemptors = sorted(
        {p.metadata.name for _, p in events.seen if p.metadata.labels["app"] == "critical"}
    )
    assert len(victims) == 2, (
        f"two 1-GPU victims free the 2 GPUs, not {by} (critical pods seen: {preemptors})"
    )
    for victim in victims.values():
        target = _conditions(victim)["DisruptionTarget"]
        assert (target.status, target.reason) == ("True", "PreemptionByScheduler")
        assert victim.metadata.labels["app"] == "batch"
    deleted = {p.metadata.name for kind, p in events.seen if kind == "DELETED"}
    assert set(victims) <= deleted, "the victims were not deleted"
    # The Deployment recreated its two pods; they wait, Pending, while the GPUs are taken.
    pending = wait_for(
        lambda: [p for p in _app_pods(core, namespace, "batch") if p.status.phase == "Pending"],
        what="recreated batch pods",
    )
    time.sleep(0.5)
    pending = [p for p in _app_pods(core, namespace, "batch") if not p.spec.node_name]
    assert len(pending) == 2 and len(_app_pods(core, namespace, "batch")) == 4
    scheduled = _conditions(pending[0])["PodScheduled"]
    assert (scheduled.status, scheduled.reason) == ("False", "Unschedulable")

    # The critical work gone, the batch work takes its GPUs back.
    apps.delete_namespaced_deployment("critical", namespace)
    wait_for(lambda: _running(core, namespace, "batch", 4), what="batch work back")


def test_preemption_policy_never_waits_without_evicting(
    api: client.ApiClient, namespace: str
) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    apps.create_namespaced_deployment(namespace, deployment("batch", 4, 1, "low"))
    wait_for(lambda: _running(core, namespace, "batch", 4), what="4 batch pods running")
    apps.create_namespaced_deployment(namespace, deployment("polite", 1, 1, "high-never"))
    polite = wait_for(lambda: _app_pods(core, namespace, "polite"), what="the pod")[0]
    time.sleep(1.0)  # longer than a victim's grace: a preemption would show by now
    polite = core.read_namespaced_pod(polite.metadata.name, namespace)
    assert polite.spec.preemption_policy == "Never" and polite.spec.node_name is None
    assert polite.status.nominated_node_name is None
    assert _conditions(polite)["PodScheduled"].reason == "Unschedulable"
    batch = _app_pods(core, namespace, "batch")
    assert len(batch) == 4 and not any("DisruptionTarget" in _conditions(p) for p in batch)


def _kueue(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def _workloads(api: client.ApiClient, ns: str) -> list[dict[str, Any]]:
    items = _kueue(api).list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]
    return list(items)


def _status(wl: dict[str, Any], kind: str) -> tuple[str, str] | None:
    for c in (wl.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return c["status"], c.get("reason", "")
    return None


def test_kueue_admits_by_quota_and_evicts_lower_priority_for_higher(
    api: client.ApiClient, server: KubeApiServer, namespace: str
) -> None:
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    core.patch_namespace(namespace, {"metadata": {"labels": {"kueue-managed": "true"}}})
    cq = f"cq-{namespace}"
    _kueue(api).create_cluster_custom_object(
        *KUEUE,
        "clusterqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": [GPU],
                        "flavors": [
                            {
                                "name": "default-flavor",
                                "resources": [{"name": GPU, "nominalQuota": "2"}],
                            }
                        ],
                    }
                ],
            },
        },
    )
    _kueue(api).create_namespaced_custom_object(
        *KUEUE,
        namespace,
        "localqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "q"},
            "spec": {"clusterQueue": cq},
        },
    )
    try:
        apps.create_namespaced_deployment(namespace, deployment("batch", 3, 1, "low", "q"))
        wait_for(lambda: _running(core, namespace, "batch", 2), what="2 admitted pods running")
        time.sleep(0.3)
        wls = _workloads(api, namespace)
        admitted = [w for w in wls if _status(w, "Admitted") == ("True", "Admitted")]
        assert len(wls) == 3 and len(admitted) == 2, "quota of 2 GPUs admits two of three"
        assert all(w["status"]["admission"]["clusterQueue"] == cq for w in admitted)
        assert all(_status(w, "QuotaReserved") == ("True", "QuotaReserved") for w in admitted)
        gated = [p for p in _app_pods(core, namespace, "batch") if p.spec.scheduling_gates]
        assert len(gated) == 1 and gated[0].spec.scheduling_gates[0].name == (
            "kueue.x-k8s.io/admission"
        )
        assert _conditions(gated[0])["PodScheduled"].reason == "SchedulingGated"
        usage = _kueue(api).get_cluster_custom_object(*KUEUE, "clusterqueues", cq)["status"]
        assert usage["flavorsUsage"][0]["resources"] == [
            {"name": GPU, "total": "2", "borrowed": "0"}
        ]

        apps.create_namespaced_deployment(namespace, deployment("urgent", 1, 1, "high", "q"))
        wait_for(lambda: _running(core, namespace, "urgent", 1), what="the urgent pod admitted")
        evicted = wait_for(
            lambda: [w for w in _workloads(api, namespace) if _status(w, "Evicted")],
            what="an evicted Workload",
        )
        assert len(evicted) == 1 and _status(evicted[0], "Evicted") == ("True", "Preempted")
        assert _status(evicted[0], "Admitted") == ("False", "NoReservation")
        assert "admission" not in evicted[0]["status"]
        assert evicted[0]["spec"]["priority"] == 100
        urgent = [w for w in _workloads(api, namespace) if w["spec"]["priority"] == 10_000]
        assert len(urgent) == 1 and _status(urgent[0], "Admitted") == ("True", "Admitted")
        time.sleep(0.3)
        running = [p for p in _app_pods(core, namespace, "batch") if p.status.phase == "Running"]
        assert len(running) == 1, "one low-priority pod keeps its quota, the rest wait"
    finally:
        for name in ("batch", "urgent"):
            apps.delete_namespaced_deployment(name, namespace)
        _kueue(api).delete_cluster_custom_object(*KUEUE, "clusterqueues", cq)
