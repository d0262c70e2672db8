"""What a run records beyond its columns: approval, the snapshot before, measurement, recovers.

Stored as one JSON column. Runs written by older versions lack some keys and may hold
keys this one does not know: missing keys take their defaults, unknown ones are kept as
they are, so reading a run and writing it back loses nothing.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer
from pydantic.dataclasses import dataclass

from drills.store.kinds import RunStatus, Verdict

# The form the store has always written (``+00:00``, not pydantic's ``Z``).
IsoDatetime = Annotated[dt.datetime, PlainSerializer(dt.datetime.isoformat, when_used="json")]


class _Stored(BaseModel):
    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True)
class Approval:
    """A person's answer to the plan's approval gate."""

    approved: bool
    approver: str
    comment: str = ""


class MeasurementRecord(_Stored):
    """RTO, client-visible RTO and RPO of a takeover against the plan's objectives."""

    t0: IsoDatetime | None = None
    restored: IsoDatetime | None = None
    dns_switched: IsoDatetime | None = None
    old_ttl_seconds: float | None = None
    rto_seconds: float | None = None
    client_rto_seconds: float | None = None
    rpo_seconds: dict[str, float | None] = Field(default_factory=dict)
    rto_target_seconds: float | None = None
    rpo_target_seconds: float | None = None
    verdict: Verdict | None = None


class ForecastRecord(_Stored):
    """What the preflight forecast for this run, beside what it measured."""

    rto_seconds: float | None = None
    interval: list[float] = Field(default_factory=list)  # [low, high]
    client_rto_seconds: float | None = None
    full_capacity_seconds: float | None = None
    basis: str = ""
    drills: int = 0
    measured_rto_seconds: float | None = None
    error_seconds: float | None = None  # measured minus forecast
    inside_interval: bool | None = None


class RecoverAttempt(_Stored):
    """One run of `drills recover` on the run, successful or not."""

    at: IsoDatetime
    action: str | None = None
    status: RunStatus
    undone: list[str] = Field(default_factory=list)
    drift: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None


class RunDetails(_Stored):
    plan_path: str | None = None  # the plan file, so `drills recover` can reload it
    approval: Approval | None = None
    unfenced: bool = False  # an incident went on with the primary unreachable, on request
    # Stored before the first change of a drill: what failback and recover verify against.
    snapshot_before: dict[str, Any] | None = None
    planned: list[str] = Field(default_factory=list)  # a dry run's changes, current → intended
    drift: dict[str, Any] | None = Field(default_factory=dict)  # after failback; None: unverified
    measurement: MeasurementRecord | None = None
    forecast: ForecastRecord | None = None
    recover: list[RecoverAttempt] = Field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


__all__ = [
    "Approval",
    "ForecastRecord",
    "IsoDatetime",
    "MeasurementRecord",
    "RecoverAttempt",
    "RunDetails",
]
