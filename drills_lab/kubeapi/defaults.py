"""Defaulting, as the real API server applies it on every write.

Only the defaults a client may read back and rely on: replicas, strategies,
service ports, secret types, pod policies. Anything else is stored as sent.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Callable
from typing import Any

_cluster_ips = itertools.count(10)


def _pod_spec(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for container in spec.get("containers") or []:
        if not isinstance(container, dict):
            continue
        image = str(container.get("image", ""))
        tag = image.rsplit("/", 1)[-1]
        latest = "@" not in tag and (":" not in tag or tag.endswith(":latest"))
        container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("resources", {})
        for port in container.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")


def _template(spec: dict[str, Any]) -> None:
    template = spec.get("template")
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        _pod_spec(template["spec"])


def _deployment(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    strategy = spec.setdefault("strategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxSurge", "25%")
        rolling.setdefault("maxUnavailable", "25%")
    _template(spec)
    obj.setdefault("status", {})


def _statefulset(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = spec.setdefault("updateStrategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        strategy.setdefault("rollingUpdate", {}).setdefault("partition", 0)
    spec.setdefault(
        "persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"}
    )
    _template(spec)
    obj.setdefault("status", {"replicas": 0, "availableReplicas": 0})


def _job(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    for key, value in (("backoffLimit", 6), ("completions", 1), ("parallelism", 1),
                       ("completionMode", "NonIndexed"), ("suspend", False),
                       ("podReplacementPolicy", "TerminatingOrFailed")):  # fmt: skip
        spec.setdefault(key, value)
    # The job controller's selector: the Job's own UID and name on every pod it makes.
    meta = obj.get("metadata") or {}
    uid, name = str(meta.get("uid", "")), str(meta.get("name", ""))
    template = spec.get("template")
    if isinstance(template, dict) and not spec.get("manualSelector"):
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        if isinstance(labels, dict):
            labels.update({
                "batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                "controller-uid": uid, "job-name": name,
            })  # fmt: skip
        spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    _template(spec)
    obj.setdefault("status", {})


def _pod(obj: dict[str, Any]) -> None:
    _pod_spec(obj.setdefault("spec", {}))
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", "BestEffort")


def _service(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    if "clusterIP" not in spec:
        n = next(_cluster_ips)
        spec["clusterIP"] = f"10.96.{n // 250}.{n % 250 + 1}"
    spec.setdefault("clusterIPs", [spec["clusterIP"]])
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    obj.setdefault("status", {"loadBalancer": {}})


def _secret(obj: dict[str, Any]) -> None:
    obj.setdefault("type", "Opaque")
    # The API server folds write-only stringData into data and never returns it.
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict):
        data = obj.get("data") or {}
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj["data"] = data


def _namespace(obj: dict[str, Any]) -> None:
    name = obj.get("metadata", {}).get("name")
    labels = obj["metadata"].setdefault("labels", {}) if name else {}
    if name:
        labels["kubernetes.io/metadata.name"] = name
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj.setdefault("status", {}).setdefault("phase", "Active")


def _ingress(obj: dict[str, Any]) -> None:
    obj.setdefault("status", {"loadBalancer": {}})


# A kubelet always reports every nodeInfo field, and the official client
# refuses a Node without them; seeded nodes get blanks for what they omit.
_NODE_INFO = {
    "architecture": "amd64",
    "operatingSystem": "linux",
    "bootID": "",
    "containerRuntimeVersion": "",
    "kernelVersion": "",
    "kubeProxyVersion": "",
    "kubeletVersion": "",
    "machineID": "",
    "osImage": "",
    "systemUUID": "",
}


def _node(obj: dict[str, Any]) -> None:
    obj.setdefault("spec", {})
    status = obj.setdefault("status", {})
    if isinstance(status, dict):
        info = status.setdefault("nodeInfo", {})
        for key, value in _NODE_INFO.items():
            info.setdefault(key, value)


DEFAULTERS: dict[str, Callable[[dict[str, Any]], None]] = {
    "deployments": _deployment,
    "statefulsets": _statefulset,
    "jobs": _job,
    "pods": _pod,
    "services": _service,
    "secrets": _secret,
    "namespaces": _namespace,
    "ingresses": _ingress,
    "nodes": _node,
}


def apply_defaults(resource: str, obj: dict[str, Any]) -> None:
    defaulter = DEFAULTERS.get(resource)
    if defaulter is not None:
        defaulter(obj)
