"""How a drill is judged and run: its objectives and smoke probes, its schedule, approval,
sentinel, evidence checkpoints and practice name."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from drills.plan.durations import PositiveDuration, format_duration
from drills.plan.models.base import PlanModel, StrictBool, StrictInt
from drills.plan.models.workloads import WorkloadKind
from drills.plan.rules import raise_rules
from drills.plan.types import (
    CheckpointPlace,
    CronExpr,
    DnsName,
    HttpUrl,
    K8sName,
    K8sNamespace,
    ShortText,
    Text,
    TimeZone,
)

# Fencing, bringing DR up, switching DNS and one smoke probe take longer than this
# even on a warm DR pool; an RTO below it is a typo (1ms, 10s for 10m) that fails every drill.
MIN_RTO_SECONDS = 30.0


class Objectives(PlanModel):
    rto: PositiveDuration
    rpo: PositiveDuration

    @model_validator(mode="after")
    def _feasible(self) -> Objectives:
        if self.rto < MIN_RTO_SECONDS:
            message = (
                f"an RTO of {format_duration(self.rto)} is below any feasible takeover: "
                "fencing, bringing DR up, switching DNS and a smoke probe take at least "
                f"{format_duration(MIN_RTO_SECONDS)}"
            )
            raise_rules("objectives", [(("rto",), message)])
        return self


class SmokeProbe(PlanModel):
    name: ShortText
    """The probe's name, in reports."""
    url: HttpUrl
    """The URL to request, through the plan's DNS name."""
    expect_status: Annotated[StrictInt, Field(ge=100, le=599)] = 200
    """The HTTP status the probe must get."""
    expect_body: Text | None = Field(None, description="A substring the body must contain.")
    timeout: PositiveDuration = 30.0


class Schedule(PlanModel):
    cron: CronExpr
    """A cron expression: at most hourly; weekly to quarterly is usual."""
    timezone: TimeZone = "UTC"
    """The IANA time zone the cron expression is read in."""


class Approval(PlanModel):
    required: StrictBool = False
    """A person must approve before the primary is fenced."""
    timeout: PositiveDuration = 3600.0


class Sentinel(PlanModel):
    """A small real workload kept running at DR, so the DR chain is exercised every day."""

    namespace: K8sNamespace
    """The sentinel's namespace at DR."""
    name: K8sName
    """The sentinel workload's name."""
    kind: WorkloadKind = WorkloadKind.DEPLOYMENT
    """Deployment or StatefulSet."""
    max_age: PositiveDuration = Field(
        3600.0, description="How old the sentinel's last success may be."
    )
    success_annotation: ShortText = Field(
        "drills.dev/last-success",
        description="The annotation where the sentinel writes the time of its last success.",
    )

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class EvidenceSettings(PlanModel):
    """Where the evidence chain's checkpoints are kept outside the history store."""

    checkpoints: CheckpointPlace | None = Field(
        None,
        description="A directory, or s3://bucket/prefix (Object Lock used where the bucket "
        "has it): `drills evidence checkpoint` and the readiness deployment write there.",
    )


class Practice(PlanModel):
    """How `drills run --mode practice` sees DR serve without touching production."""

    record: DnsName | None = Field(
        None,
        description="A name of its own (never one production serves from) that a practice "
        "points at DR's value and removes afterwards, restoring what it held. Without it, "
        "a practice probes DR's endpoint directly.",
    )
