"""The ``scale`` subresource: an ``autoscaling/v1`` Scale view of a workload's replicas."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drills_lab.kubeapi.objects import dig
from drills_lab.kubeapi.patch import apply_patch
from drills_lab.kubeapi.resources import ResourceType
from drills_lab.kubeapi.selectors import selector_string
from drills_lab.kubeapi.status import invalid

SCALE = ResourceType("autoscaling", "v1", "Scale", "scale", "scale", True)


def scale_of(obj: dict[str, Any]) -> dict[str, Any]:
    m = obj["metadata"]
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: m[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in m
        },
        "spec": {"replicas": int(dig(obj, "spec", "replicas") or 0)},
        "status": {
            "replicas": int(dig(obj, "status", "replicas") or 0),
            "selector": selector_string(dig(obj, "spec", "selector")),
        },
    }


def _apply(obj: dict[str, Any], scale: dict[str, Any]) -> dict[str, Any]:
    replicas = dig(scale, "spec", "replicas")
    name = obj["metadata"]["name"]
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        raise invalid(
            SCALE, name, [("spec.replicas", f"Invalid value: {replicas!r}: must be an integer")]
        )
    if replicas < 0:
        raise invalid(
            SCALE,
            name,
            [("spec.replicas", f"Invalid value: {replicas}: must be greater than or equal to 0")],
        )
    obj["spec"]["replicas"] = replicas
    # A stale resourceVersion in the Scale makes the store answer 409 Conflict.
    sent = dig(scale, "metadata", "resourceVersion")
    if sent:
        obj["metadata"]["resourceVersion"] = sent
    return obj


def scale_update(body: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The store mutation for a PUT of a Scale."""
    return lambda obj: _apply(obj, body)


def scale_patch(content_type: str, patch: bytes) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The store mutation for a PATCH of a Scale, in any of the supported patch types."""
    return lambda obj: _apply(obj, apply_patch(content_type, scale_of(obj), patch))
