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
    """RTO, client-visible RTO, full capacity and RPO of a takeover against the objectives."""

    t0: IsoDatetime | None = None
    restored: IsoDatetime | None = None
    dns_switched: IsoDatetime | None = None
    # The normal tier ready too, after the service was restored (None: a run before
    # takeovers restored the service first, when the RTO already waited for it).
    full_capacity: IsoDatetime | None = None
    old_ttl_seconds: float | None = None
    rto_seconds: float | None = None
    client_rto_seconds: float | None = None
    full_capacity_seconds: float | None = None
    # From the first scale-up at DR to the last GPU freed for the critical tier by
    # preempting DR's low-priority work (0: nothing was preempted; None: not measured).
    preemption_seconds: float | None = None
    rpo_seconds: dict[str, float | None] = Field(default_factory=dict)
    rto_target_seconds: float | None = None
    rpo_target_seconds: float | None = None
    verdict: Verdict | None = None
    # Until DR carried target_percent of the primary's demand at T0 (None: not carried, or
    # no demand measured), and per service what was needed, reached and carried.
    carry_seconds: float | None = None
    capacity: dict[str, Any] | None = None


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
    # Changes missing from the journal (lost by the store), undone from the snapshot before.
    from_snapshot: list[str] = Field(default_factory=list)


class StuckRecord(_Stored):
    """An incident whose deadline passed with the takeover part-way: held as it stood, and
    announced (``incident.stuck``); recover-orphans retries its completion until it is done."""

    at: IsoDatetime
    error: str
    state: str  # what was serving, in words, as seen from outside when it stopped
    serving: bool  # whether users reached a serving site then (DNS at a site that serves)
    dns: str  # "primary", "dr", "mixed", "other" or "unknown"
    dns_values: list[str] = Field(default_factory=list)
    endpoints: dict[str, bool] = Field(default_factory=dict)  # role → serves (HTTP 200)
    command: str  # the one command that continues it
    # A deadline passed (what it waited for may still come): recover-orphans retries it.
    # Otherwise (a refusal) it waits for a person to fix the cause and continue it.
    auto_retry: bool = True
    completed_at: IsoDatetime | None = None  # a recover --complete finished the takeover


class DatasetCopiedBack(_Stored):
    """One dataset at a failback's final sync: what DR wrote while it served, checked at
    the primary."""

    name: str
    dr_objects: int = 0  # objects under the prefix at DR
    written_at_dr: int = 0  # of them, written at DR since the incident's T0
    bytes_written_at_dr: int = 0
    missing_at_primary: int = 0  # DR objects not (yet) readable at the primary; 0 when synced
    lag_seconds: float = 0.0  # age of the oldest DR object not readable at the primary


class FailbackRecord(_Stored):
    """How a failback went: its downtime from T0 (DR writers stopped) and the data checked."""

    t0: IsoDatetime | None = None  # the DR writers stopped: nothing writes at either site
    synced: IsoDatetime | None = None  # every DR write readable at the primary
    dns_switched: IsoDatetime | None = None
    restored: IsoDatetime | None = None  # the smoke through the name passed at the primary
    downtime_seconds: float | None = None  # restored - t0
    datasets: list[DatasetCopiedBack] = Field(default_factory=list)


class IncidentLink(_Stored):
    """The thread of one incident through its runs, kept on each of them.

    On the incident run: the failback that closed it. On the failback run: the incident
    it closes. ``closed_at`` is set on the incident when its failback succeeded, or when
    a mistaken incident was abandoned with `drills recover RUN --fail-back`.
    """

    incident_run: str | None = None
    failback_run: str | None = None
    closed_at: IsoDatetime | None = None
    closed_by: str | None = None  # "failback" or "recover --fail-back"


class ValidationJobRecord(_Stored):
    """One validation job of a run (the plan's validation_jobs): how it ended, and where."""

    name: str
    namespace: str
    verdict: str  # "succeeded", "failed", "deadline passed", "no output" or "error"
    reason: str = ""  # why it did not succeed, in one line
    started_at: IsoDatetime | None = None
    duration_seconds: float | None = None  # from the Job's creation to its end
    node: str | None = None  # the node its (last) pod ran on
    gpu_labels: dict[str, str] = Field(default_factory=dict)  # that node's GPU and driver labels
    output: str | None = None  # the new object seen at DR, as s3://bucket/key
    log_tail: list[str] = Field(default_factory=list)  # the last lines its pod printed
    deleted: bool = False  # the Job (and its pods) deleted after the run

    @property
    def passed(self) -> bool:
        return self.verdict == "succeeded"


class DetectionRecord(_Stored):
    """When an incident's trouble was detected, before a person declared it (T0)."""

    detected_at: IsoDatetime
    source: str  # "alert" (an approved proposal) or "operator" (--detected-at)
    detection_seconds: float | None = None  # T0 (declared) - detected_at
    proposal: str | None = None  # the proposal approved, when an alert proposed it


class RunDetails(_Stored):
    plan_path: str | None = None  # the plan file, so `drills recover` can reload it
    # The application the run was restricted to (`--only`); None: the whole plan.
    application: str | None = None
    approval: Approval | None = None
    unfenced: bool = False  # an incident went on with the primary unreachable, on request
    force_unfenced: bool = False  # it was asked to (--force-unfenced): a recover holds it so too
    # The run stopped part-way on its own (a cancel, a failed rollback) and left the
    # decision to a person: recover-orphans, which takes runs whose process died, leaves it
    # alone. A stuck incident (``stuck``) is not left: recover-orphans retries it.
    left_for_decision: bool = False
    # What recover-orphans last told people about this run (its action and outcome): told
    # again only when that changes, not at every scan.
    orphan_announced: str | None = None
    # Stored before the first change of a drill or an incident (and of a failback): what
    # failback and recover verify against.
    snapshot_before: dict[str, Any] | None = None
    planned: list[str] = Field(default_factory=list)  # a dry run's changes, current → intended
    drift: dict[str, Any] | None = Field(default_factory=dict)  # after failback; None: unverified
    measurement: MeasurementRecord | None = None
    forecast: ForecastRecord | None = None
    recover: list[RecoverAttempt] = Field(default_factory=list)
    # The history store did not answer during the run (when, how long, why): the run went
    # on from its write-ahead journal and wrote everything back once it answered.
    store_outages: list[str] = Field(default_factory=list)
    incident: IncidentLink | None = None  # an incident or a failback: the incident record
    failback: FailbackRecord | None = None  # a failback run: downtime and the data copied back
    stuck: StuckRecord | None = None  # an incident held when a deadline passed part-way
    # The plan's gates as they stood at the start (drills.takeover.gates): an incident
    # lists them, a skipped scheduled run says which held it back.
    gates: list[dict[str, Any]] = Field(default_factory=list)
    # An incident's detection: the alert's startsAt, or --detected-at (None: not known).
    detection: DetectionRecord | None = None
    # The plan's SLOs after the switch (drills.takeover.slo_watch), and its load probe:
    # {"primary": baseline, "dr": after the switch, "limits", "overhead_seconds"}.
    slo: list[dict[str, Any]] = Field(default_factory=list)
    load: dict[str, Any] | None = None
    # The plan's validation jobs, as they ran at DR (drills.takeover.validation_jobs).
    validation_jobs: list[ValidationJobRecord] = Field(default_factory=list)
    # What DR carried (drills.takeover.carry) for a run that stopped after measuring it
    # (a drill not met): a run that ends keeps it in its measurement.
    capacity: dict[str, Any] | None = None

    @property
    def full_capacity_seconds(self) -> float | None:
        """When the normal tier was ready too, seconds after T0 (None: not measured)."""
        return self.measurement.full_capacity_seconds if self.measurement else None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


__all__ = [
    "Approval",
    "DatasetCopiedBack",
    "DetectionRecord",
    "FailbackRecord",
    "ForecastRecord",
    "IncidentLink",
    "IsoDatetime",
    "MeasurementRecord",
    "RecoverAttempt",
    "RunDetails",
    "StuckRecord",
    "ValidationJobRecord",
]
