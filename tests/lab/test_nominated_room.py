"""The room a preemption frees is the preemptor's: the lab's scheduler, as kube-scheduler,
counts a pod nominated to a node, of a new pod's priority or higher, as running there.

Found when a Deployment's replacement of a victim took the freed GPUs before its preemptor
bound, on a loaded machine, and the preemptor evicted again (five victims, not two). A
preemptor also waits while any victim it chose is still in the store.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

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


def a_node_of_four_gpus() -> tuple[ResourceStore, list[dict[str, Any]]]:
    store = ResourceStore()
    store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": "default"}})  # fmt: skip
    node = store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE},
                                  "status": {"allocatable": {"nvidia.com/gpu": "4"}}})  # fmt: skip
    return store, [node]


def four_gpus_two_free_and_a_preemptor_nominated() -> tuple[ResourceStore, list[dict[str, Any]]]:
    store, nodes = a_node_of_four_gpus()
    for i in range(2):
        store.create("pods", gpu_pod(f"batch-{i}", 1, 100, NODE))
    store.create("pods", gpu_pod("critical", 2, 10_000))
    store.patch("pods", "default", "critical", nominated, subresource="status")
    return store, nodes


def test_a_lower_priority_pod_waits_while_the_room_is_held_for_the_preemptor() -> None:
    store, nodes = four_gpus_two_free_and_a_preemptor_nominated()
    placement = PriorityScheduler(store).place(gpu_pod("replacement", 1, 100), nodes, [NODE])
    assert placement.node is None and placement.pending
    # Only the nomination keeps it out, and no victim would let it in: it is not nominated.
    assert placement.nominated is None, "nominated to a node with no victims"


def test_a_lower_priority_nomination_claims_nothing_from_the_preemptors_room() -> None:
    """Found in a loop of the preemption test under load: a victim's replacement had been
    nominated with no victims; the preemptor counted that as a claim on the room its own
    victims were freeing, and preempted two more pods."""
    store, nodes = four_gpus_two_free_and_a_preemptor_nominated()
    store.create("pods", gpu_pod("batch-2", 1, 100, NODE))
    store.patch("pods", "default", "batch-2", lambda p: {**p, "metadata": {
        **p["metadata"], "deletionTimestamp": "2026-12-05T00:00:00Z"}})  # fmt: skip
    store.create("pods", gpu_pod("replacement", 1, 100))
    store.patch("pods", "default", "replacement", nominated, subresource="status")
    preemptor = store.get("pods", "default", "critical")
    assert preemptor is not None
    # 4 GPUs: 3 bound (one of them terminating); the preemptor's room is that one's GPU
    # and the free one.
    placement = PriorityScheduler(store).place(preemptor, nodes, [NODE])
    assert placement.pending and placement.nominated is None
    assert not marked(store), "the preemptor chose more victims"


def test_a_higher_priority_pod_is_not_held_back_by_a_lower_nomination() -> None:
    store, nodes = four_gpus_two_free_and_a_preemptor_nominated()
    placement = PriorityScheduler(store).place(gpu_pod("urgent", 1, 20_000), nodes, [NODE])
    assert placement.node == NODE


def test_the_preemptor_itself_binds_to_the_room_it_is_nominated_to() -> None:
    store, nodes = four_gpus_two_free_and_a_preemptor_nominated()
    preemptor = store.get("pods", "default", "critical")
    assert preemptor is not None
    assert PriorityScheduler(store).place(preemptor, nodes, [NODE]).node == NODE


def four_batch_pods_on_the_node() -> tuple[ResourceStore, list[dict[str, Any]]]:
    store, nodes = a_node_of_four_gpus()
    for i in range(4):
        store.create("pods", gpu_pod(f"batch-{i}", 1, 100, NODE))
    return store, nodes


def marked(store: ResourceStore) -> set[str]:
    return {
        p["metadata"]["name"]
        for p in store.list("pods")
        if any(
            c["type"] == "DisruptionTarget" for c in (p.get("status") or {}).get("conditions") or []
        )
    }


def test_a_preemptor_whose_victim_is_still_there_chooses_no_more() -> None:
    """A victim whose terminating write was lost stays bound and not terminating: its
    preemptor still waits for it, where counting terminating pods alone would evict two more."""
    store, nodes = four_batch_pods_on_the_node()
    scheduler = PriorityScheduler(store)
    first = scheduler.place(gpu_pod("critical", 2, 10_000), nodes, [NODE])
    assert first.nominated == NODE and len(marked(store)) == 2
    store.create("pods", gpu_pod("critical", 2, 10_000))
    store.patch("pods", "default", "critical", nominated, subresource="status")
    lost = sorted(marked(store))[0]
    store.patch("pods", "default", lost, lambda p: {**p, "metadata": {
        k: v for k, v in p["metadata"].items() if not k.startswith("deletion")}})  # fmt: skip
    again = scheduler.place(store.get("pods", "default", "critical") or {}, nodes, [NODE])
    assert again.pending and again.nominated is None and len(marked(store)) == 2


def test_a_second_round_for_one_preemptor_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    """Once its victims are gone, a preemptor whose room was taken preempts again, as
    kube-scheduler would; the lab logs it, with what holds the node, since it is rare."""
    store, nodes = four_batch_pods_on_the_node()
    scheduler = PriorityScheduler(store)
    scheduler.place(gpu_pod("critical", 2, 10_000), nodes, [NODE])
    store.create("pods", gpu_pod("critical", 2, 10_000))
    for name in marked(store):
        store.delete("pods", "default", name)
        store.create("pods", gpu_pod(f"{name}-taker", 1, 100, NODE))
    with caplog.at_level(logging.WARNING, logger="drills_lab.kubeapi.preemption"):
        again = scheduler.place(store.get("pods", "default", "critical") or {}, nodes, [NODE])
    assert again.nominated == NODE
    assert "default/critical preempts again on gpu-0" in caplog.text
    assert "-taker(prio 100, 1 GPU)" in caplog.text
