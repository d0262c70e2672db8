"""Watches on the lab Kubernetes API server, through the official client's Watch."""

from __future__ import annotations

import threading

from kubernetes import client, watch

from drills_lab.kubeapi import ResourceStore


def test_watch_replays_in_order_from_a_resource_version(
    kube_api: client.ApiClient, kube_namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    start = core.list_namespaced_config_map(kube_namespace).metadata.resource_version
    core.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "noise"}})
    core.create_namespaced_config_map(
        kube_namespace, {"metadata": {"name": "cfg"}, "data": {"v": "1"}}
    )
    core.patch_namespaced_config_map("cfg", kube_namespace, {"data": {"v": "2"}})
    core.delete_namespaced_config_map("cfg", kube_namespace)

    w = watch.Watch()
    events = []
    for e in w.stream(
        core.list_namespaced_config_map,
        kube_namespace,
        resource_version=start,
        field_selector="metadata.name=cfg",
        timeout_seconds=5,
    ):
        events.append((e["type"], e["object"].metadata.name, (e["object"].data or {}).get("v")))
        if len(events) == 3:
            w.stop()
    assert events == [("ADDED", "cfg", "1"), ("MODIFIED", "cfg", "2"), ("DELETED", "cfg", "2")]


def test_watch_streams_live_changes_and_selector_transitions(
    kube_api: client.ApiClient, kube_namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_config_map(
        kube_namespace, {"metadata": {"name": "before", "labels": {"role": "x"}}}
    )
    w = watch.Watch()
    seen: list[tuple[str, str]] = []

    def change() -> None:
        core.create_namespaced_config_map(
            kube_namespace, {"metadata": {"name": "live", "labels": {"role": "x"}}}
        )
        core.patch_namespaced_config_map(
            "live", kube_namespace, {"metadata": {"labels": {"role": "y"}}}
        )
        core.patch_namespaced_config_map(
            "live", kube_namespace, {"metadata": {"labels": {"role": "x"}}}
        )

    writer = threading.Timer(0.05, change)
    writer.start()
    # No resource_version: the current state arrives first as ADDED, then changes.
    for event in w.stream(
        core.list_namespaced_config_map, kube_namespace, label_selector="role=x", timeout_seconds=5
    ):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 4:
            w.stop()
    writer.join()
    assert seen == [("ADDED", "before"), ("ADDED", "live"), ("DELETED", "live"), ("ADDED", "live")]


def test_store_history_expires_old_versions() -> None:
    store = ResourceStore(history=3)
    for i in range(5):
        store.create("namespaces", {"metadata": {"name": f"n{i}"}})
    assert store.events_since(0) is None
    recent = store.events_since(store.resource_version - 2)
    assert recent is not None and [e.obj["metadata"]["name"] for e in recent] == ["n3", "n4"]
    assert store.wait_for_change(store.resource_version, 0.01) == store.resource_version
