"""The room a preemption frees is the preemptor's: the lab's scheduler, as kube-scheduler,
counts a pod nominated to a node, of a new pod's priority or higher, as running there.

Found when a Deployment's replacement of a victim took the freed GPUs before its preemptor
bound, on a loaded machine, and the preemptor evicted again (five victims, not two).
"""

from __future__ import annotations

from typing import Any

from drills_lab.kubeapi.preemption import PriorityScheduler
from drills_lab.kubeapi.store import ResourceStore

NODE = "gpu-0"


def gpu_pod(name: str, gpus: int, priority: int, node: str | None = None) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {
        "priority": priority,
        "containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}],
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": spec}  # fmt: skip


def nominated(pod: dict[str, Any]) -> dict[str, Any]:
    return pod | {"status": {"phase": "Pending", "nominatedNodeName": NODE}}


def four_gpus_two_free_and_a_preemptor_nominated() -> tuple[ResourceStore, list[dict[str, Any]]]:
    store = ResourceStore()
    store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": "default"}})  # fmt: skip
    node = store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE},
                                  "status": {"allocatable": {"nvidia.com/gpu": "4"}}})  # fmt: skip
    for i in range(2):
        store.create("pods", gpu_pod(f"batch-{i}", 1, 100, NODE))
    store.create("pods", gpu_pod("critical", 2, 10_000))
    store.patch("pods", "default", "critical", nominated, subresource="status")
    return store, [node]


def test_a_lower_priority_pod_waits_while_the_room_is_held_for_the_preemptor() -> None:
    store, nodes = four_gpus_two_free_and_a_preemptor_nominated()
    placement = PriorityScheduler(store).place(gpu_pod("replacement", 1, 100), nodes, [NODE])
    assert placement.node is None and placement.pending


def test_a_higher_priority_pod_is_not_held_back_by_a_lower_nomination() -> None:
    store, nodes = four_gpus_two_free_and_a_preemptor_nominated()
    placement = PriorityScheduler(store).place(gpu_pod("urgent", 1, 20_000), nodes, [NODE])
    assert placement.node == NODE


def test_the_preemptor_itself_binds_to_the_room_it_is_nominated_to() -> None:
    store, nodes = four_gpus_two_free_and_a_preemptor_nominated()
    preemptor = store.get("pods", "default", "critical")
    assert preemptor is not None
    assert PriorityScheduler(store).place(preemptor, nodes, [NODE]).node == NODE
