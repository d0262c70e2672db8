"""Validation of writes; each problem becomes a cause of a 422 Invalid, as in the real API."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Any

from drills_lab.kubeapi.crd_validation import CRD_VALIDATORS
from drills_lab.kubeapi.objects import dig
from drills_lab.kubeapi.selectors import labels_match, parse_label_selector, selector_string
from drills_lab.kubeapi.status import ApiError

Causes = list[tuple[str, str]]

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")

_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
    "start with an alphabetic character, and end with an alphanumeric character"
)

# How each resource's name is checked: (pattern, max length, message).
_NAME_RULES: dict[str, tuple[re.Pattern[str], int, str]] = {
    "namespaces": (_DNS1123_LABEL, 63, _LABEL_MSG),
    "services": (_DNS1035_LABEL, 63, _DNS1035_MSG),
}
_DEFAULT_NAME_RULE = (_DNS1123_SUBDOMAIN, 253, _SUBDOMAIN_MSG)


def check_name(resource: str, name: str) -> Causes:
    pattern, limit, message = _NAME_RULES.get(resource, _DEFAULT_NAME_RULE)
    if len(name) > limit:
        return [
            ("metadata.name", f'Invalid value: "{name}": must be no more than {limit} characters')
        ]
    if not pattern.match(name):
        return [("metadata.name", f'Invalid value: "{name}": {message}')]
    return []


def _labels(obj: dict[str, Any], field: str) -> Causes:
    causes: Causes = []
    labels = dig(obj, *field.split("."))
    if labels is None:
        return causes
    if not isinstance(labels, dict):
        return [(field, "Invalid value: must be a map of strings")]
    for key, value in labels.items():
        name = key.rsplit("/", 1)[-1]
        if not _QUALIFIED_NAME.match(name) or len(name) > 63:
            causes.append((field, f'Invalid value: "{key}": name part must be a qualified name'))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            causes.append(
                (field, f'Invalid value: "{value}": a valid label must be 63 characters or less')
            )
    return causes


def _replicas(obj: dict[str, Any]) -> Causes:
    replicas = dig(obj, "spec", "replicas")
    if replicas is None:
        return []
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        return [("spec.replicas", f"Invalid value: {replicas!r}: must be an integer")]
    if replicas < 0:
        return [("spec.replicas", f"Invalid value: {replicas}: must be greater than or equal to 0")]
    return []


def _containers(spec: Any, field: str) -> Causes:
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not containers or not isinstance(containers, list):
        return [(f"{field}.containers", "Required value")]
    causes: Causes = []
    for i, container in enumerate(containers):
        where = f"{field}.containers[{i}]"
        if not isinstance(container, dict):
            causes.append((where, "Invalid value: must be an object"))
            continue
        if not container.get("name"):
            causes.append((f"{where}.name", "Required value"))
        if not container.get("image"):
            causes.append((f"{where}.image", "Required value"))
        causes += _env(container, where)
    return causes


def _workload(obj: dict[str, Any]) -> Causes:
    causes = _replicas(obj)
    selector = dig(obj, "spec", "selector")
    if not isinstance(selector, dict) or not (
        selector.get("matchLabels") or selector.get("matchExpressions")
    ):
        causes.append(("spec.selector", "Required value"))
    template = dig(obj, "spec", "template")
    if not isinstance(template, dict):
        return [*causes, ("spec.template", "Required value")]
    causes += _labels(obj, "spec.template.metadata.labels")
    if isinstance(selector, dict) and not causes:
        requirements = parse_label_selector(selector_string(selector))
        if not labels_match(requirements, template):
            causes.append(
                (
                    "spec.template.metadata.labels",
                    "Invalid value: `selector` does not match template `labels`",
                )
            )
    causes += _containers(template.get("spec"), "spec.template.spec")
    return causes


_JOB_RESTART_POLICIES = ("OnFailure", "Never")
_JOB_COUNTS = ("backoffLimit", "completions", "parallelism", "ttlSecondsAfterFinished")


def _job(obj: dict[str, Any]) -> Causes:
    causes: Causes = []
    for key in _JOB_COUNTS:
        value = dig(obj, "spec", key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            causes.append((f"spec.{key}", f"Invalid value: {value!r}: must be an integer"))
        elif value is not None and value < 0:
            causes.append(
                (f"spec.{key}", f"Invalid value: {value}: must be greater than or equal to 0")
            )
    template = dig(obj, "spec", "template")
    if not isinstance(template, dict):
        return [*causes, ("spec.template", "Required value")]
    spec = template.get("spec")
    policy = spec.get("restartPolicy") if isinstance(spec, dict) else None
    if policy not in _JOB_RESTART_POLICIES:
        causes.append((
            "spec.template.spec.restartPolicy",
            f'Unsupported value: "{policy}": supported values: "OnFailure", "Never"',
        ))  # fmt: skip
    return causes + _containers(spec, "spec.template.spec")


def _env(container: dict[str, Any], where: str) -> Causes:
    """A container's env: each entry named, with a value or a reference, not both."""
    causes: Causes = []
    env = container.get("env") or []
    if not isinstance(env, list):
        return [(f"{where}.env", "Invalid value: must be a list")]
    for i, var in enumerate(env):
        at = f"{where}.env[{i}]"
        if not isinstance(var, dict) or not var.get("name"):
            causes.append((f"{at}.name", "Required value"))
            continue
        source = var.get("valueFrom")
        if source is not None and var.get("value"):
            causes.append((
                f"{at}.valueFrom",
                "Invalid value: may not be specified when `value` is not empty",
            ))  # fmt: skip
        ref = source.get("secretKeyRef") if isinstance(source, dict) else None
        if isinstance(ref, dict) and not (ref.get("name") and ref.get("key")):
            causes.append((f"{at}.valueFrom.secretKeyRef", "Required value: name and key"))
    return causes


def _pod(obj: dict[str, Any]) -> Causes:
    return _containers(obj.get("spec"), "spec")


def _service(obj: dict[str, Any]) -> Causes:
    causes: Causes = []
    for i, port in enumerate(dig(obj, "spec", "ports") or []):
        number = port.get("port") if isinstance(port, dict) else None
        if not isinstance(number, int) or not 0 < number < 65536:
            causes.append(
                (f"spec.ports[{i}].port", f"Invalid value: {number!r}: must be between 1 and 65535")
            )
    return causes


def _secret(obj: dict[str, Any]) -> Causes:
    causes: Causes = []
    for key, value in (obj.get("data") or {}).items():
        try:
            base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            # The real server fails to decode such a body; the value itself is never echoed.
            causes.append((f"data[{key}]", "Invalid value: not valid base64"))
    if obj.get("type") == "kubernetes.io/dockerconfigjson" and ".dockerconfigjson" not in (
        obj.get("data") or {}
    ):
        causes.append(("data[.dockerconfigjson]", "Required value"))
    return causes


_VALIDATORS: dict[str, Callable[[dict[str, Any]], Causes]] = {
    "deployments": _workload,
    "statefulsets": _workload,
    "jobs": _job,
    "pods": _pod,
    "services": _service,
    "secrets": _secret,
    **CRD_VALIDATORS,
}


def validate(resource: str, obj: dict[str, Any]) -> Causes:
    """Every problem of ``obj`` as ``(field, message)``; empty when it is valid."""
    causes = check_name(resource, str(obj.get("metadata", {}).get("name", "")))
    causes += _labels(obj, "metadata.labels")
    annotations = obj.get("metadata", {}).get("annotations")
    if annotations is not None and (
        not isinstance(annotations, dict)
        or not all(isinstance(v, str) for v in annotations.values())
    ):
        causes.append(("metadata.annotations", "Invalid value: must be a map of strings"))
    validator = _VALIDATORS.get(resource)
    if validator is not None:
        causes += validator(obj)
    return causes


def validate_update(resource: str, old: dict[str, Any], new: dict[str, Any]) -> Causes:
    """Checks that only apply to updates: immutable fields."""
    if resource in ("deployments", "statefulsets") and dig(old, "spec", "selector") != dig(
        new, "spec", "selector"
    ):
        return [("spec.selector", "Invalid value: field is immutable")]
    return []


def raise_if_invalid(error: Callable[[Causes], ApiError], causes: Causes) -> None:
    if causes:
        raise error(causes)
