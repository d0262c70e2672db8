"""When an incident's trouble was detected: the start of the timeline detection →
declaration → fence → service restored → DR carrying (full capacity).

``detected_at`` is the startsAt of the alert whose proposal an operator approved
(drills.takeover.proposals), or a time an operator gives by hand (`drills run --mode
incident --detected-at`); without either, nothing is claimed.
"""

from __future__ import annotations

import datetime as dt

from drills.store.details import DetectionRecord

# A time this far ahead of our clock is a typo or a wrong zone, not clock skew.
FUTURE_TOLERANCE = dt.timedelta(minutes=5)


def parse_moment(value: str, what: str) -> dt.datetime:
    """An ISO 8601 time as an aware datetime (one without a zone is UTC); ValueError with
    one line naming ``what`` when it is not one, or lies in the future."""
    try:
        moment = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(
            f"{what} {value!r} is not an ISO 8601 time such as 2026-12-02T07:55:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    if moment - dt.datetime.now(dt.UTC) > FUTURE_TOLERANCE:
        raise ValueError(f"{what} {value} is in the future")
    return moment


def detection_problem(
    detected_at: dt.datetime | None, declared_at: dt.datetime | None
) -> str | None:
    """Why a detection time cannot go with this declaration; None when it can."""
    if detected_at is None or declared_at is None:
        return None
    if detected_at > declared_at:
        return (
            f"detected_at {detected_at.isoformat()} is after the declaration "
            f"{declared_at.isoformat()}: detection comes first"
        )
    return None


def detection_record(
    detected_at: dt.datetime | None, declared_at: dt.datetime | None, proposal: str | None
) -> DetectionRecord | None:
    """A run's detection, with the seconds to its declaration once T0 is known."""
    if detected_at is None:
        return None
    seconds = None if declared_at is None else (declared_at - detected_at).total_seconds()
    return DetectionRecord(
        detected_at=detected_at,
        source="alert" if proposal else "operator",
        detection_seconds=None if seconds is None else round(seconds, 3),
        proposal=proposal,
    )


__all__ = ["detection_problem", "detection_record", "parse_moment"]
