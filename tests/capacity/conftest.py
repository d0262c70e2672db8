"""A lab of this package's own: its tests scale work up at DR, which the shared lab forbids."""

from __future__ import annotations

import time

import pytest

from drills_lab import topology
from drills_lab.loopback import loopback_client
from drills_lab.runtime import LabInfo
from tests.support.lab_groups import LabGroups
from tests.support.services import require_system_binary

# What the lab's inventory says, recomputed from its description.
DR_GPU_NODES = sorted(
    f"{pool.prefix}-{i}"
    for pool in topology.SITES["dr"].pools
    if pool.gpus
    for i in range(pool.count)
)


def wait_for_samples(info: LabInfo, hosts: int) -> None:
    """Until Prometheus has scraped every DR GPU node at least once."""
    query = 'count(count by (Hostname) (DCGM_FI_DEV_GPU_UTIL{site="dr"}))'
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = loopback_client().get(f"{info.prometheus}/api/v1/query", params={"query": query})
        result = answer.json()["data"]["result"]
        if result and int(result[0]["value"][1]) == hosts:
            return
        time.sleep(0.5)
    raise AssertionError(f"Prometheus never scraped the {hosts} DR GPU nodes")


@pytest.fixture
def capacity_lab(lab_groups: LabGroups) -> LabInfo:
    """The lab, once its Prometheus holds a sample of every DR GPU: a page or report read
    before the first scrape finds no DCGM series and falls back to allocation."""
    require_system_binary("prometheus", "prometheus")
    return lab_groups.get(
        "capacity_lab", lambda info: wait_for_samples(info, len(DR_GPU_NODES)), ready_delay=0.2
    )
