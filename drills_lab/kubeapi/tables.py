"""Server-side printing: ``meta.k8s.io/v1`` Tables, as ``kubectl get`` asks for them.

Columns and cell formats follow the real server's printers so kubectl's
output looks as it does against a real cluster.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from drills_lab.kubeapi.objects import condition, dig, parse_rfc3339
from drills_lab.kubeapi.resources import ResourceType
from drills_lab.kubeapi.selectors import selector_string

Column = tuple[str, str, int]  # name, type, priority (1 = only with -o wide)
Cells = Callable[[dict[str, Any], dt.datetime], list[Any]]


def wants_table(accept: str) -> bool:
    """Whether the Accept header offers a meta.k8s.io/v1 Table (kubectl lists it first)."""
    for offer in accept.lower().split(","):
        params = dict(p.strip().split("=", 1) for p in offer.split(";")[1:] if "=" in p)
        if (
            params.get("as") == "table"
            and params.get("g") == "meta.k8s.io"
            and params.get("v") == "v1"
        ):
            return True
    return False


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery's HumanDuration, which kubectl's AGE column uses."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return _units(minutes, "m", s % 60, "s")
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return _units(hours, "h", minutes % 60, "m")
    if hours < 48:
        return f"{hours}h"
    return _human_days(hours)


def _human_days(hours: int) -> str:
    """HumanDuration from two days on."""
    days = hours // 24
    if hours < 24 * 8:
        return _units(days, "d", hours % 24, "h")
    if hours < 24 * 365 * 2:
        return f"{days}d"
    if hours < 24 * 365 * 8:
        return _units(days // 365, "y", days % 365, "d")
    return f"{days // 365}y"


def _units(big: int, big_unit: str, small: int, small_unit: str) -> str:
    """Two units as kubectl shows them: 3m7s, or 3m when the smaller one is zero."""
    return f"{big}{big_unit}{small}{small_unit}" if small else f"{big}{big_unit}"


def _age(obj: dict[str, Any], now: dt.datetime) -> str:
    created = parse_rfc3339(dig(obj, "metadata", "creationTimestamp"))
    return "<unknown>" if created is None else human_duration((now - created).total_seconds())


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _containers(obj: dict[str, Any]) -> tuple[str, str]:
    containers = dig(obj, "spec", "template", "spec", "containers") or []
    names = ",".join(str(c.get("name", "")) for c in containers)
    images = ",".join(str(c.get("image", "")) for c in containers)
    return names, images


def _deployment(obj: dict[str, Any], now: dt.datetime) -> list[Any]:
    status = obj.get("status") or {}
    names, images = _containers(obj)
    return [
        f"{_int(status.get('readyReplicas'))}/{_int(dig(obj, 'spec', 'replicas'))}",
        _int(status.get("updatedReplicas")),
        _int(status.get("availableReplicas")),
        _age(obj, now),
        names,
        images,
        selector_string(dig(obj, "spec", "selector")),
    ]


def _statefulset(obj: dict[str, Any], now: dt.datetime) -> list[Any]:
    names, images = _containers(obj)
    ready = _int(dig(obj, "status", "readyReplicas"))
    return [f"{ready}/{_int(dig(obj, 'spec', 'replicas'))}", _age(obj, now), names, images]


def _pod_status(obj: dict[str, Any]) -> str:
    if dig(obj, "metadata", "deletionTimestamp"):
        return "Terminating"
    status = obj.get("status") or {}
    reason = str(status.get("reason") or status.get("phase") or "Unknown")
    for cs in status.get("containerStatuses") or []:
        waiting = dig(cs, "state", "waiting", "reason")
        if waiting:
            reason = str(waiting)
    return reason


def _pod(obj: dict[str, Any], now: dt.datetime) -> list[Any]:
    statuses = dig(obj, "status", "containerStatuses") or []
    total = len(dig(obj, "spec", "containers") or [])
    ready = sum(1 for cs in statuses if cs.get("ready"))
    restarts = sum(_int(cs.get("restartCount")) for cs in statuses)
    gates = dig(obj, "spec", "readinessGates") or []
    return [
        f"{ready}/{total}",
        _pod_status(obj),
        str(restarts),
        _age(obj, now),
        dig(obj, "status", "podIP") or "<none>",
        dig(obj, "spec", "nodeName") or "<none>",
        dig(obj, "status", "nominatedNodeName") or "<none>",
        f"{len(gates)}/{len(gates)}" if gates else "<none>",
    ]


def _job(obj: dict[str, Any], now: dt.datetime) -> list[Any]:
    wanted = _int((obj.get("spec") or {}).get("completions"))
    return [f"{_int((obj.get('status') or {}).get('succeeded'))}/{wanted}", _age(obj, now)]


def _node(obj: dict[str, Any], now: dt.datetime) -> list[Any]:
    ready = condition(obj, "Ready")
    state = "Unknown"
    if ready is not None:
        state = "Ready" if ready.get("status") == "True" else "NotReady"
    if dig(obj, "spec", "unschedulable"):
        state += ",SchedulingDisabled"
    prefix = "node-role.kubernetes.io/"
    labels = dig(obj, "metadata", "labels") or {}
    roles = sorted(k[len(prefix) :] for k in labels if k.startswith(prefix))
    info = dig(obj, "status", "nodeInfo") or {}
    addresses = {a.get("type"): a.get("address") for a in dig(obj, "status", "addresses") or []}
    return [
        state,
        ",".join(roles) or "<none>",
        _age(obj, now),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP") or "<none>",
        addresses.get("ExternalIP") or "<none>",
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _port(port: dict[str, Any]) -> str:
    node_port = f":{port['nodePort']}" if port.get("nodePort") else ""
    return f"{port.get('port')}{node_port}/{port.get('protocol', 'TCP')}"


def _service(obj: dict[str, Any], now: dt.datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    ports = ",".join(_port(p) for p in spec.get("ports") or [])
    ingress = dig(obj, "status", "loadBalancer", "ingress") or []
    external = ",".join(i.get("ip") or i.get("hostname", "") for i in ingress)
    if not external:
        external = "<pending>" if spec.get("type") == "LoadBalancer" else "<none>"
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items()))
    return [
        spec.get("type", ""),
        spec.get("clusterIP") or "<none>",
        external,
        ports or "<none>",
        _age(obj, now),
        selector or "<none>",
    ]


def _ingress(obj: dict[str, Any], now: dt.datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    hosts = ",".join(str(r.get("host") or "*") for r in spec.get("rules") or []) or "*"
    ingress = dig(obj, "status", "loadBalancer", "ingress") or []
    address = ",".join(i.get("ip") or i.get("hostname", "") for i in ingress)
    ports = "80, 443" if spec.get("tls") else "80"
    return [spec.get("ingressClassName") or "<none>", hosts, address, ports, _age(obj, now)]


def _namespace(obj: dict[str, Any], now: dt.datetime) -> list[Any]:
    return [dig(obj, "status", "phase") or "", _age(obj, now)]


def _secret(obj: dict[str, Any], now: dt.datetime) -> list[Any]:
    return [obj.get("type", ""), len(obj.get("data") or {}), _age(obj, now)]


def _configmap(obj: dict[str, Any], now: dt.datetime) -> list[Any]:
    count = len(obj.get("data") or {}) + len(obj.get("binaryData") or {})
    return [count, _age(obj, now)]


_S, _I = "string", "integer"
PRINTERS: dict[str, tuple[tuple[Column, ...], Cells]] = {
    "deployments": (
        (("Ready", _S, 0), ("Up-to-date", _I, 0), ("Available", _I, 0), ("Age", _S, 0),
         ("Containers", _S, 1), ("Images", _S, 1), ("Selector", _S, 1)),
        _deployment,
    ),
    "statefulsets": (
        (("Ready", _S, 0), ("Age", _S, 0), ("Containers", _S, 1), ("Images", _S, 1)),
        _statefulset,
    ),
    "pods": (
        (("Ready", _S, 0), ("Status", _S, 0), ("Restarts", _S, 0), ("Age", _S, 0), ("IP", _S, 1),
         ("Node", _S, 1), ("Nominated Node", _S, 1), ("Readiness Gates", _S, 1)),
        _pod,
    ),
    "nodes": (
        (("Status", _S, 0), ("Roles", _S, 0), ("Age", _S, 0), ("Version", _S, 0),
         ("Internal-IP", _S, 1), ("External-IP", _S, 1), ("OS-Image", _S, 1),
         ("Kernel-Version", _S, 1), ("Container-Runtime", _S, 1)),
        _node,
    ),
    "services": (
        (("Type", _S, 0), ("Cluster-IP", _S, 0), ("External-IP", _S, 0), ("Port(s)", _S, 0),
         ("Age", _S, 0), ("Selector", _S, 1)),
        _service,
    ),
    "ingresses": (
        (("Class", _S, 0), ("Hosts", _S, 0), ("Address", _S, 0), ("Ports", _S, 0), ("Age", _S, 0)),
        _ingress,
    ),
    "jobs": ((("Completions", _S, 0), ("Age", _S, 0)), _job),
    "namespaces": ((("Status", _S, 0), ("Age", _S, 0)), _namespace),
    "secrets": ((("Type", _S, 0), ("Data", _I, 0), ("Age", _S, 0)), _secret),
    "configmaps": ((("Data", _I, 0), ("Age", _S, 0)), _configmap),
}  # fmt: skip
_FALLBACK: tuple[tuple[Column, ...], Cells] = ((("Age", _S, 0),), lambda o, now: [_age(o, now)])


def _row_object(obj: dict[str, Any], include: str) -> dict[str, Any] | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def to_table(
    rt: ResourceType,
    objects: list[dict[str, Any]],
    resource_version: int,
    include: str = "Metadata",
) -> dict[str, Any]:
    """A Table of ``objects``; ``include`` is the includeObject query parameter."""
    columns, cells = PRINTERS.get(rt.plural, _FALLBACK)
    definitions = [
        {
            "name": "Name",
            "type": "string",
            "format": "name",
            "description": "Name must be unique within a namespace.",
            "priority": 0,
        }
    ]
    definitions += [
        {"name": name, "type": kind, "format": "", "description": name, "priority": priority}
        for name, kind, priority in columns
    ]
    now = dt.datetime.now(dt.UTC)
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": [dig(obj, "metadata", "name"), *cells(obj, now)]}
        embedded = _row_object(obj, include)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": str(resource_version)},
        "columnDefinitions": definitions,
        "rows": rows,
    }
