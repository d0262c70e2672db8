"""What fails over: the workloads, each in a tier."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, model_validator

from drills.plan.models.base import PlanModel, StrictBool, StrictInt
from drills.plan.rules import raise_rules
from drills.plan.types import ImageRef, K8sName, K8sNamespace


class Tier(StrEnum):
    CRITICAL = "critical"
    NORMAL = "normal"
    BATCH = "batch"


class WorkloadKind(StrEnum):
    DEPLOYMENT = "Deployment"
    STATEFULSET = "StatefulSet"


class Workload(PlanModel):
    name: K8sName
    """The workload's name."""
    namespace: K8sNamespace
    """Its namespace (the same at both sites)."""
    kind: WorkloadKind
    """Deployment or StatefulSet."""
    tier: Tier
    """critical: needed to serve (up before the RTO); normal: up after it; batch: paused."""
    dr_replicas: Annotated[StrictInt, Field(ge=0, le=10_000)]
    """Replicas at DR during a takeover; at least 1 for a critical workload."""
    writer: StrictBool = Field(False, description="Stopped at the primary before DR comes up.")
    gpu: Annotated[StrictInt, Field(ge=0, le=64, description="nvidia.com/gpu per replica.")] = 0
    images: tuple[ImageRef, ...] = Field((), description="Empty: read from the cluster.")

    @model_validator(mode="after")
    def _critical_has_replicas(self) -> Workload:
        if self.tier is Tier.CRITICAL and self.dr_replicas == 0:
            message = (
                "a critical workload needs at least 1 DR replica: a drill would fence the "
                "primary and switch DNS with nothing behind it (use tier normal or batch "
                "for a workload that may stay down)"
            )
            raise_rules("workload", [(("dr_replicas",), message)])
        return self

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def dr_gpus(self) -> int:
        return self.gpu * self.dr_replicas
