"""A small Kubernetes-API-compatible server for the lab.

It serves the subset of the API that drills, the official Python client and
kubectl use (discovery, CRUD, patch, watch, tables, the scale and status
subresources), and runs a controller that moves workloads toward ready.
"""

from drills_lab.kubeapi.controller import NEVER_READY_ANNOTATION, READY_DELAY_ANNOTATION
from drills_lab.kubeapi.kubeconfig import write_kubeconfig
from drills_lab.kubeapi.server import KubeApiServer
from drills_lab.kubeapi.status import ApiError
from drills_lab.kubeapi.store import ResourceStore

__all__ = [
    "NEVER_READY_ANNOTATION",
    "READY_DELAY_ANNOTATION",
    "ApiError",
    "KubeApiServer",
    "ResourceStore",
    "write_kubeconfig",
]
