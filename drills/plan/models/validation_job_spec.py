"""The plan's validation jobs: Kubernetes Jobs a drill runs at DR to prove GPU work runs there.

A drill starts each as soon as the critical tier is ready at DR (beside the normal tier,
never on the RTO's path); each must succeed within its deadline and, where it names an
``output``, leave a new object under that DR bucket and prefix. An incident runs only
those marked ``in_incident``, after its RTO, and never rolls back for them.
"""

from __future__ import annotations

from typing import Any

from pydantic import model_validator

from drills.plan.durations import PositiveDuration
from drills.plan.models.base import PlanModel, StrictBool
from drills.plan.rules import raise_rules
from drills.plan.types import BucketName, FilePath, K8sName, K8sNamespace, ObjectPrefix
from drills.text import is_credential_name

DEFAULT_DEADLINE_S = 1800.0


class JobOutput(PlanModel):
    """Where at DR the job's output must appear: a new object under this bucket and prefix."""

    bucket: BucketName
    """The DR bucket the job writes to (on DR's object storage, `sites.dr.objects`)."""
    prefix: ObjectPrefix = ""
    """The prefix under which a new object must appear during the run."""


class ValidationJob(PlanModel):
    """A Kubernetes Job template run to completion at DR during a drill."""

    name: K8sName
    """The Job's name at DR (a Job of that name must not exist there when the drill starts)."""
    namespace: K8sNamespace
    """The namespace the Job runs in at DR."""
    manifest: dict[str, Any] | None = None
    """The Job, inline (``apiVersion: batch/v1``, ``kind: Job``); its name and namespace
    are set from the fields above."""
    manifest_file: FilePath | None = None
    """The Job in a YAML file, relative to the plan's directory; instead of ``manifest``."""
    deadline: PositiveDuration = DEFAULT_DEADLINE_S
    """How long the Job may take, from its creation to its success."""
    output: JobOutput | None = None
    """Where a new object must appear at DR during the run; none: success alone is enough."""
    in_incident: StrictBool = False
    """Also run it in an incident, after the RTO, without rollback (never in its way)."""

    @model_validator(mode="after")
    def _one_manifest(self) -> ValidationJob:
        if (self.manifest is None) == (self.manifest_file is None):
            raise_rules(
                "validation job",
                [(("manifest",), "give exactly one of manifest and manifest_file")],
            )
        if self.manifest is not None:
            raise_rules("validation job", [(("manifest",), p) for p in job_problems(self.manifest)])
        return self


def job_problems(manifest: Any) -> list[str]:
    """What keeps ``manifest`` from being a Job drills can run; [] when nothing."""
    if not isinstance(manifest, dict):
        return ["must be a mapping (a Kubernetes Job)"]
    problems = []
    if manifest.get("apiVersion", "batch/v1") != "batch/v1":
        problems.append(f"apiVersion must be batch/v1, not {manifest.get('apiVersion')!r}")
    if manifest.get("kind", "Job") != "Job":
        problems.append(f"kind must be Job, not {manifest.get('kind')!r}")
    template = (
        (manifest.get("spec") or {}).get("template")
        if isinstance(manifest.get("spec"), dict)
        else None
    )
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        return [*problems, "spec.template.spec (the pod) is missing"]
    return problems + _literal_secrets(template["spec"])


def _literal_secrets(pod: dict[str, Any]) -> list[str]:
    """Env vars named like a credential with a value written in: the plan, the run's
    journal and its report would all hold it. It belongs in a Secret at DR."""
    found = []
    for container in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]:
        for var in (container.get("env") or []) if isinstance(container, dict) else []:
            name = var.get("name") if isinstance(var, dict) else None
            if isinstance(name, str) and is_credential_name(name) and var.get("value"):
                found.append(
                    f"env {name} holds a literal value: take it from a Secret at DR "
                    "(valueFrom.secretKeyRef)"
                )
    return found
