"""The datasets replicated from the primary to DR, and the S3 Inventory reports read for
buckets too big to list."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import Field, model_validator

from drills.plan.durations import PositiveDuration
from drills.plan.models.base import PlanModel, StrictInt
from drills.plan.rules import Rule, raise_rules
from drills.plan.types import BucketName, Label, ObjectPrefix, ShortText


class DatasetKind(StrEnum):
    DATA = "data"
    CHECKPOINT = "checkpoint"
    MODEL = "model"


class InventorySchedule(StrEnum):
    """How often S3 publishes the report (the configuration's ``Schedule.Frequency``)."""

    DAILY = "Daily"
    WEEKLY = "Weekly"

    @property
    def seconds(self) -> float:
        return 86_400.0 if self is InventorySchedule.DAILY else 7 * 86_400.0


# S3 allows letters, digits and - . _ in an inventory configuration's id, up to 64.
InventoryId = Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")]
# The strftime directives a daily partition may name: a year, a month and a day, nothing finer.
_RECENT_DIRECTIVES = {"%Y", "%m", "%d"}


class InventoryDestination(PlanModel):
    """Where one side's inventory reports land: the destination bucket and prefix."""

    bucket: BucketName
    """The bucket S3 writes this side's inventory reports to."""
    prefix: ObjectPrefix = ""
    """The reports' prefix in that bucket."""
    config_id: InventoryId | None = None  # when this side's configuration has its own id
    """This side's inventory configuration id, when it differs from the dataset's."""


class DatasetInventory(PlanModel):
    """S3 Inventory reports of both buckets, read instead of listing every object.

    Reports land at ``PREFIX/SOURCE-BUCKET/CONFIG-ID/YYYY-MM-DDTHH-MMZ/manifest.json``.
    ``recent_layout`` names the dataset's date partitions under its prefix as a strftime
    pattern (``"%Y/%m/%d/"``, ``"dt=%Y-%m-%d/"``): the days since the older report are
    then listed as well, so objects newer than the reports are checked too.
    """

    config_id: InventoryId
    """The S3 Inventory configuration's id."""
    schedule: InventorySchedule = InventorySchedule.DAILY
    """How often S3 publishes the report."""
    primary: InventoryDestination
    """Where the primary bucket's reports are."""
    dr: InventoryDestination
    """Where the DR bucket's reports are."""
    recent_layout: ShortText | None = None
    """How recent objects, newer than the reports, are named, to list them directly."""

    def config_for(self, side: InventoryDestination) -> str:
        return side.config_id or self.config_id

    @model_validator(mode="after")
    def _recent_is_daily(self) -> DatasetInventory:
        layout = self.recent_layout
        if layout is None:
            return self
        used = set(re.findall(r"%.", layout))
        rules: list[Rule] = []
        if not {"%Y", "%m", "%d"} <= used or used - _RECENT_DIRECTIVES:
            rules.append(
                (
                    ("recent_layout",),
                    'needs %Y, %m and %d and no other % directive, e.g. "%Y/%m/%d/" or '
                    '"dt=%Y-%m-%d/" (one partition per day)',
                )
            )
        elif not layout.endswith("/"):
            rules.append((("recent_layout",), "must end with / (a partition is a directory)"))
        raise_rules("DatasetInventory", rules)
        return self


class Dataset(PlanModel):
    name: Label
    """The dataset's name, in reports and metrics."""
    kind: DatasetKind
    """data, checkpoint or model: checkpoints are also checked for freshness."""
    primary_bucket: BucketName
    """The bucket at the primary."""
    dr_bucket: BucketName
    """Its replica at DR."""
    prefix: ObjectPrefix = ""
    """Only objects under this prefix."""
    rpo_target: PositiveDuration
    min_versions: Annotated[StrictInt, Field(ge=1, le=1000)] = 3
    """Non-current versions the DR bucket's lifecycle must keep."""
    inventory: DatasetInventory | None = None
    """For buckets too big to list: compare their S3 Inventory reports instead."""
    store: Label | None = None
    """The object store holding both copies: a name of `sites.*.object_stores`, at each
    site; without it, the sites' `objects`."""
