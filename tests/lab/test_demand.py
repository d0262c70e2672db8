"""The lab's users and the requests of a probe share one queue, in the order they arrive: a
request queues behind the users who came before it, however late the generator's tick."""

from __future__ import annotations

import time
from typing import Any

import pytest

from drills_lab import topology
from drills_lab.demand import PEAK_RPS, DemandGenerator
from drills_lab.endpoint import SiteEndpoint
from drills_lab.kubeapi.store import ResourceStore
from drills_lab.load import BASE_LATENCY_S, PER_REPLICA_RPS, SiteLoad
from drills_lab.seed_cluster import seed_site


def test_users_offered_late_queue_ahead_of_a_request_that_came_after_them() -> None:
    load = SiteLoad("primary")
    capacity = 30.0  # below the peak: the users alone build a queue
    demand = DemandGenerator({"primary": load}, lambda site: capacity, at_peak=True)
    begun = time.monotonic()
    demand.offer(begun)
    # A second of users, offered only now, as a starved tick would.
    assert demand.offer(begun + 1.0) == int(PEAK_RPS)
    status, seconds = load.admit(capacity, begun + 1.0)
    # They came first: the request waits for their work past its own arrival.
    queued = PEAK_RPS / capacity - 1.0
    assert status == 200
    assert seconds == pytest.approx(BASE_LATENCY_S + queued, abs=0.05)
    assert demand.offer(begun + 1.0) == 0  # each user is offered once


def _made_ready(obj: dict[str, Any]) -> dict[str, Any]:
    replicas = obj["spec"]["replicas"]
    if f"{obj['metadata']['namespace']}/{obj['metadata']['name']}" in topology.INFERENCE_WORKLOADS:
        replicas = 1  # one replica serves: less than the users' peak
    return obj | {"status": {"replicas": replicas, "readyReplicas": replicas}}


def serving_site() -> ResourceStore:
    store = ResourceStore()
    seed_site(store, "primary", "registry.test", lambda *_: "value", drift=False)
    controller = ("deployments", topology.CONTROLLER_NAMESPACE, topology.CONTROLLER_NAME)
    store.patch(*controller, _made_ready, subresource="status")
    for w in topology.critical_workloads():
        resource = "deployments" if w.kind == "Deployment" else "statefulsets"
        store.patch(resource, w.namespace, w.name, _made_ready, subresource="status")
    return store


def test_the_endpoint_offers_the_users_before_it_admits_a_request() -> None:
    endpoint = SiteEndpoint("primary", serving_site(), "127.0.0.1", 0)
    assert endpoint.serving_capacity() == PER_REPLICA_RPS
    assert endpoint.answer() == (200, b"primary\n", BASE_LATENCY_S)  # no users yet
    demand = DemandGenerator(
        {"primary": endpoint.load}, lambda site: endpoint.serving_capacity(), at_peak=True
    )
    demand.start()
    demand.stop()  # its tick never comes: only the endpoint offers the users
    endpoint.users_first = demand.offer
    time.sleep(0.5)
    status, _, seconds = endpoint.answer()
    # Half a second of users at the peak, served at less than its rate, came first: the
    # request waits behind them, or is shed when their queue is longer than a request waits.
    assert status == 503 or seconds > BASE_LATENCY_S + 0.1, (status, seconds)
