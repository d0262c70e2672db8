"""One site's Kubernetes API, through the official client.

client (KubeTarget: requests by resource path, reads, the drill's few writes, wait_ready),
config (a site's own client configuration), watch (a workload's watch stream, read until
it settles), discovery (which 404s mean "not installed"), errors (the one translation of
client and urllib3 errors), jobs (validation Jobs and their pods), quantity (resource
quantities), scheduling (priority classes, Kueue queues, quotas, daemon sets).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drills.faces import lazy_face

if TYPE_CHECKING:
    from drills.targets.kube.client import KubeTarget
    from drills.targets.kube.errors import NotReadyInTime
    from drills.targets.kube.quantity import canonical, cores, gib, parse_quantity
    from drills.targets.kube.scheduling import (
        QUEUE_LABEL,
        cluster_queues,
        daemonsets,
        local_queue,
        priority_classes,
        resource_quotas,
    )
    from drills.targets.kube.watch import settled

__all__ = [
    "QUEUE_LABEL",
    "KubeTarget",
    "NotReadyInTime",
    "canonical",
    "cluster_queues",
    "cores",
    "daemonsets",
    "gib",
    "local_queue",
    "parse_quantity",
    "priority_classes",
    "resource_quotas",
    "settled",
]

__getattr__ = lazy_face(
    __name__,
    {
        "client": ["KubeTarget"],
        "errors": ["NotReadyInTime"],
        "quantity": ["canonical", "cores", "gib", "parse_quantity"],
        "scheduling": [
            "QUEUE_LABEL",
            "cluster_queues",
            "daemonsets",
            "local_queue",
            "priority_classes",
            "resource_quotas",
        ],
        "watch": ["settled"],
    },
)
