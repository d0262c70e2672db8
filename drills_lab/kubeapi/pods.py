"""Pods as the workload controllers and kubelet would make and report them."""

from __future__ import annotations

import hashlib
import itertools
import json
import secrets
from typing import Any

from drills_lab.kubeapi.objects import clone, condition, dig, now_rfc3339

_SAFE = "bcdfghjklmnpqrstvwxz2456789"
_pod_ips = itertools.count(2)


def template_hash(template: dict[str, Any]) -> str:
    """A short stable name-safe hash of a pod template, like pod-template-hash."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    n = int.from_bytes(digest[:5], "big")
    out: list[str] = []
    while n and len(out) < 10:
        n, r = divmod(n, len(_SAFE))
        out.append(_SAFE[r])
    return "".join(out)


def owner_uid(pod: dict[str, Any], kinds: tuple[str, ...]) -> str | None:
    """The uid of the pod's controlling owner when it is one of ``kinds``."""
    for ref in dig(pod, "metadata", "ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") in kinds:
            return str(ref.get("uid"))
    return None


def label(obj: dict[str, Any], key: str) -> str | None:
    value = (dig(obj, "metadata", "labels") or {}).get(key)
    return value if isinstance(value, str) else None


def is_ready(pod: dict[str, Any]) -> bool:
    ready = condition(pod, "Ready")
    return ready is not None and ready.get("status") == "True"


def new_pod(
    owner: dict[str, Any], name: str, extra_labels: dict[str, str], node: str | None
) -> dict[str, Any]:
    """A pod stamped from ``owner``'s template, owned by it."""
    template = owner["spec"]["template"]
    tmeta = template.get("metadata") or {}
    meta: dict[str, Any] = {
        "name": name,
        "namespace": owner["metadata"]["namespace"],
        "labels": {**(tmeta.get("labels") or {}), **extra_labels},
        "ownerReferences": [
            {
                "apiVersion": owner["apiVersion"],
                "kind": owner["kind"],
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if tmeta.get("annotations"):
        meta["annotations"] = clone(tmeta["annotations"])
    spec = clone(template.get("spec") or {})
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _condition(kind: str, status: bool, now: str, reason: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {
        "type": kind,
        "status": "True" if status else "False",
        "lastTransitionTime": now,
    }
    if reason:
        c["reason"] = reason
    return c


def _qos(pod: dict[str, Any]) -> str:
    resources = [c.get("resources") or {} for c in dig(pod, "spec", "containers") or []]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(
        r.get("limits") and r.get("limits") == r.get("requests", r.get("limits")) for r in resources
    )
    return "Guaranteed" if guaranteed else "Burstable"


def pod_status(pod: dict[str, Any], ready: bool) -> dict[str, Any]:
    """The status a kubelet reports: Pending with containers being created, or Running and Ready."""
    now = now_rfc3339()
    old = pod.get("status") or {}
    containers = dig(pod, "spec", "containers") or []
    statuses = []
    for c in containers:
        state = (
            {"running": {"startedAt": now}}
            if ready
            else {"waiting": {"reason": "ContainerCreating"}}
        )
        entry: dict[str, Any] = {
            "name": c.get("name", ""),
            "image": c.get("image", ""),
            "imageID": "",
            "ready": ready,
            "started": ready,
            "restartCount": 0,
            "state": state,
        }
        if ready:
            entry["containerID"] = f"containerd://{secrets.token_hex(32)}"
        statuses.append(entry)
    status: dict[str, Any] = {
        "phase": "Running" if ready else "Pending",
        "conditions": [
            _condition("Initialized", True, now),
            _condition("Ready", ready, now, None if ready else "ContainersNotReady"),
            _condition("ContainersReady", ready, now, None if ready else "ContainersNotReady"),
            _condition("PodScheduled", True, now),
        ],
        "containerStatuses": statuses,
        "qosClass": _qos(pod),
        "startTime": old.get("startTime") or now,
    }
    if ready:
        n = next(_pod_ips)
        ip = old.get("podIP") or f"10.244.{n // 250 % 250}.{n % 250 + 1}"
        status |= {"podIP": ip, "podIPs": [{"ip": ip}]}
    return status


GPU = "nvidia.com/gpu"
_DONE = frozenset({"Succeeded", "Failed"})


def _whole(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def gpus_of(spec: dict[str, Any]) -> int:
    """The GPUs a pod spec asks for (a request, else a limit; GPUs are whole)."""
    total = 0
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        total += _whole(merged.get(GPU, 0))
    return total


def node_gpus(node: dict[str, Any]) -> int:
    return _whole(dig(node, "status", "allocatable", GPU) or 0)


def gpus_by_node(pods: list[dict[str, Any]]) -> dict[str, int]:
    """GPUs the pods not finished hold, by the node they are bound to."""
    out: dict[str, int] = {}
    for pod in pods:
        node = dig(pod, "spec", "nodeName")
        if node and dig(pod, "status", "phase") not in _DONE:
            out[node] = out.get(node, 0) + gpus_of(pod.get("spec") or {})
    return out
