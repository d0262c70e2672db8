"""The lab server's rollout controller, observed through the official Python client."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes import client, watch

from drills_lab.kubeapi import NEVER_READY_ANNOTATION, READY_DELAY_ANNOTATION

Body = Callable[..., dict[str, Any]]
T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout: float = 3.0, what: str = "condition") -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.005)


def _conditions(obj: Any) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in obj.status.conditions or []}


def _pods(core: client.CoreV1Api, namespace: str, app: str) -> list[client.V1Pod]:
    return core.list_namespaced_pod(namespace, label_selector=f"app={app}").items


def test_deployment_turns_ready_after_the_delay(
    kube_api: client.ApiClient, kube_namespace: str, deployment: Body, kube_ready_delay: float
) -> None:
    apps, core = client.AppsV1Api(kube_api), client.CoreV1Api(kube_api)
    since = core.list_namespaced_pod(kube_namespace).metadata.resource_version
    started = time.monotonic()
    apps.create_namespaced_deployment(kube_namespace, deployment("web", 2))

    # Each pod as it was created, from a watch: a list can come after the delay on a loaded
    # machine, and find the pods already running.
    first_phase: dict[str, str] = {}
    w = watch.Watch()
    for event in w.stream(core.list_namespaced_pod, kube_namespace, label_selector="app=web",
                          resource_version=since, timeout_seconds=10):  # fmt: skip
        first_phase.setdefault(event["object"].metadata.name, event["object"].status.phase)
        if len(first_phase) == 2:
            w.stop()
    assert list(first_phase.values()) == ["Pending", "Pending"]
    ready = wait_for(
        lambda: (
            (d := apps.read_namespaced_deployment("web", kube_namespace)).status.ready_replicas == 2
            and d
        )
    )
    elapsed = time.monotonic() - started
    # Not before the delay; and well before the controller's 30 s safety wake, so the pods'
    # own timer turned them ready. A tighter bound measured the machine's load instead.
    assert kube_ready_delay * 0.9 <= elapsed < kube_ready_delay + 2.0
    status = ready.status
    assert (status.replicas, status.updated_replicas, status.available_replicas) == (2, 2, 2)
    assert status.unavailable_replicas is None  # zero counts are omitted, as the real API does
    assert status.observed_generation == ready.metadata.generation == 1
    assert _conditions(ready) == {
        "Available": ("True", "MinimumReplicasAvailable"),
        "Progressing": ("True", "NewReplicaSetAvailable"),
    }

    pods = _pods(core, kube_namespace, "web")
    assert len(pods) == 2
    for pod in pods:
        owner = pod.metadata.owner_references[0]
        assert (owner.kind, owner.name, owner.uid, owner.controller) == (
            "Deployment",
            "web",
            ready.metadata.uid,
            True,
        )
        pod_hash = pod.metadata.labels["pod-template-hash"]
        assert (
            pod.metadata.name.startswith(f"web-{pod_hash}-")
            and len(pod.metadata.name) == len(f"web-{pod_hash}-") + 5
        )
        assert pod.status.phase == "Running" and pod.status.pod_ip
        assert {c.type: c.status for c in pod.status.conditions}["Ready"] == "True"
        assert pod.spec.containers[0].image == "registry.lab/app:1"


def test_scaling_creates_and_deletes_pods(
    kube_api: client.ApiClient, kube_namespace: str, deployment: Body, kube_ready_delay: float
) -> None:
    apps, core = client.AppsV1Api(kube_api), client.CoreV1Api(kube_api)
    apps.create_namespaced_deployment(kube_namespace, deployment("web", 1))
    apps.patch_namespaced_deployment_scale("web", kube_namespace, {"spec": {"replicas": 4}})
    wait_for(
        lambda: len(_pods(core, kube_namespace, "web")) == 4,
        timeout=kube_ready_delay / 2,
        what="4 pods",
    )
    wait_for(
        lambda: apps.read_namespaced_deployment("web", kube_namespace).status.ready_replicas == 4
    )

    # A deleted pod is replaced, as a ReplicaSet would.
    victim = _pods(core, kube_namespace, "web")[0].metadata.name
    core.delete_namespaced_pod(victim, kube_namespace)
    wait_for(
        lambda: (
            victim not in [p.metadata.name for p in _pods(core, kube_namespace, "web")]
            and len(_pods(core, kube_namespace, "web")) == 4
        )
    )

    # Scaling down removes pods at once, without waiting for the delay.
    apps.patch_namespaced_deployment_scale("web", kube_namespace, {"spec": {"replicas": 1}})
    wait_for(
        lambda: len(_pods(core, kube_namespace, "web")) == 1,
        timeout=kube_ready_delay / 2,
        what="1 pod",
    )
    apps.patch_namespaced_deployment_scale("web", kube_namespace, {"spec": {"replicas": 0}})
    scaled = wait_for(
        lambda: (
            (d := apps.read_namespaced_deployment("web", kube_namespace)).status.replicas is None
            and d
        )
    )
    assert _conditions(scaled)["Available"] == ("True", "MinimumReplicasAvailable")
    assert _pods(core, kube_namespace, "web") == []

    apps.patch_namespaced_deployment_scale("web", kube_namespace, {"spec": {"replicas": 1}})
    wait_for(lambda: len(_pods(core, kube_namespace, "web")) == 1)
    apps.delete_namespaced_deployment("web", kube_namespace)
    wait_for(lambda: _pods(core, kube_namespace, "web") == [], what="garbage collection of pods")


def test_never_ready_and_per_object_delay(
    kube_api: client.ApiClient, kube_namespace: str, deployment: Body, kube_ready_delay: float
) -> None:
    apps, core = client.AppsV1Api(kube_api), client.CoreV1Api(kube_api)
    apps.create_namespaced_deployment(
        kube_namespace, deployment("stuck", 2, annotations={NEVER_READY_ANNOTATION: "true"})
    )
    apps.create_namespaced_deployment(
        kube_namespace, deployment("slow", 1, annotations={READY_DELAY_ANNOTATION: "30"})
    )
    apps.create_namespaced_deployment(
        kube_namespace, deployment("fast", 1, annotations={READY_DELAY_ANNOTATION: "0"})
    )

    fast = wait_for(
        lambda: apps.read_namespaced_deployment("fast", kube_namespace).status.ready_replicas == 1,
        timeout=kube_ready_delay * 0.9,
    )
    assert fast
    time.sleep(kube_ready_delay * 2)
    stuck = apps.read_namespaced_deployment("stuck", kube_namespace)
    assert (
        stuck.status.replicas,
        stuck.status.ready_replicas,
        stuck.status.unavailable_replicas,
    ) == (2, None, 2)
    assert _conditions(stuck)["Available"] == ("False", "MinimumReplicasUnavailable")
    pods = _pods(core, kube_namespace, "stuck")
    assert [p.status.phase for p in pods] == ["Pending", "Pending"]
    assert pods[0].status.container_statuses[0].state.waiting.reason == "ContainerCreating"
    assert apps.read_namespaced_deployment("slow", kube_namespace).status.ready_replicas is None

    # Lifting the annotation lets the pods start.
    apps.patch_namespaced_deployment(
        "stuck", kube_namespace, {"metadata": {"annotations": {NEVER_READY_ANNOTATION: None}}}
    )
    wait_for(
        lambda: apps.read_namespaced_deployment("stuck", kube_namespace).status.ready_replicas == 2
    )


def test_progress_deadline_is_exceeded_by_a_stuck_rollout(
    kube_api: client.ApiClient, kube_namespace: str, deployment: Body
) -> None:
    apps = client.AppsV1Api(kube_api)
    body = deployment("stuck", 1, annotations={NEVER_READY_ANNOTATION: "true"})
    body["spec"]["progressDeadlineSeconds"] = 1
    apps.create_namespaced_deployment(kube_namespace, body)
    stuck = wait_for(
        lambda: (
            (d := apps.read_namespaced_deployment("stuck", kube_namespace))
            and _conditions(d).get("Progressing", ("",))[0] == "False"
            and d
        ),
        timeout=15,
    )
    progressing = next(c for c in stuck.status.conditions if c.type == "Progressing")
    assert (
        progressing.reason == "ProgressDeadlineExceeded"
        and "timed out progressing" in progressing.message
    )


def test_template_change_rolls_out_new_pods(
    kube_api: client.ApiClient, kube_namespace: str, deployment: Body
) -> None:
    apps, core = client.AppsV1Api(kube_api), client.CoreV1Api(kube_api)
    apps.create_namespaced_deployment(kube_namespace, deployment("web", 2))
    wait_for(
        lambda: apps.read_namespaced_deployment("web", kube_namespace).status.ready_replicas == 2
    )
    old_hash = _pods(core, kube_namespace, "web")[0].metadata.labels["pod-template-hash"]

    # Metadata and status writes leave generation alone; a spec change bumps it.
    labelled = apps.patch_namespaced_deployment(
        "web", kube_namespace, {"metadata": {"labels": {"x": "y"}}}
    )
    assert labelled.metadata.generation == 1
    image = {
        "spec": {
            "template": {"spec": {"containers": [{"name": "app", "image": "registry.lab/app:2"}]}}
        }
    }
    assert apps.patch_namespaced_deployment("web", kube_namespace, image).metadata.generation == 2

    def rolled() -> client.V1Deployment | None:
        d = apps.read_namespaced_deployment("web", kube_namespace)
        pods = _pods(core, kube_namespace, "web")
        hashes = {p.metadata.labels["pod-template-hash"] for p in pods}
        done = (
            d.status.updated_replicas == 2
            and d.status.replicas == 2
            and d.status.ready_replicas == 2
        )
        return d if done and len(pods) == 2 and old_hash not in hashes else None

    d = wait_for(rolled, what="rollout")
    assert d.status.observed_generation == 2
    assert _conditions(d)["Progressing"] == ("True", "NewReplicaSetAvailable")
    assert all(
        p.spec.containers[0].image == "registry.lab/app:2"
        for p in _pods(core, kube_namespace, "web")
    )


def test_statefulset_pods_start_in_order(
    kube_api: client.ApiClient, kube_namespace: str, deployment: Body
) -> None:
    apps, core = client.AppsV1Api(kube_api), client.CoreV1Api(kube_api)
    apps.create_namespaced_stateful_set(kube_namespace, deployment("db", 2, kind="StatefulSet"))
    first = wait_for(lambda: _pods(core, kube_namespace, "db"))
    assert [p.metadata.name for p in first] == ["db-0"]  # db-1 waits for db-0 to be ready

    sts = wait_for(
        lambda: (
            (s := apps.read_namespaced_stateful_set("db", kube_namespace)).status.ready_replicas
            == 2
            and s
        )
    )
    assert sorted(p.metadata.name for p in _pods(core, kube_namespace, "db")) == ["db-0", "db-1"]
    assert sts.status.current_revision == sts.status.update_revision
    assert (sts.status.replicas, sts.status.updated_replicas, sts.status.observed_generation) == (
        2,
        2,
        1,
    )
    assert _pods(core, kube_namespace, "db")[0].spec.hostname == "db-0"

    apps.patch_namespaced_stateful_set_scale("db", kube_namespace, {"spec": {"replicas": 1}})
    wait_for(lambda: [p.metadata.name for p in _pods(core, kube_namespace, "db")] == ["db-0"])


def test_statefulset_parallel_policy_starts_all_pods(
    kube_api: client.ApiClient, kube_namespace: str, deployment: Body, kube_ready_delay: float
) -> None:
    apps, core = client.AppsV1Api(kube_api), client.CoreV1Api(kube_api)
    body = deployment("cache", 3, kind="StatefulSet")
    body["spec"]["podManagementPolicy"] = "Parallel"
    apps.create_namespaced_stateful_set(kube_namespace, body)
    pods = wait_for(
        lambda: (
            len(_pods(core, kube_namespace, "cache")) == 3 and _pods(core, kube_namespace, "cache")
        ),
        timeout=kube_ready_delay / 2,
    )
    assert sorted(p.metadata.name for p in pods) == ["cache-0", "cache-1", "cache-2"]
