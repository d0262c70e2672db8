"""An incident as one timeline: detection → declaration → fence → service restored → DR
carrying (the normal tier ready too: full capacity), each moment with its seconds since
the one before and since detection. Read from the run's record alone."""

from __future__ import annotations

import datetime as dt
from typing import Any

from drills.store.kinds import Mode
from drills.store.models import DrillRun
from drills.timefmt import duration, moment

FENCE_PHASE = "fence"  # drills.takeover.steps.sequence.FENCE


def _phase_end(run: DrillRun, name: str) -> dt.datetime | None:
    for phase in run.timeline or []:
        if phase.get("name") == name and phase.get("status") == "ok" and phase.get("ended_at"):
            return dt.datetime.fromisoformat(phase["ended_at"])
    return None


def detection_chain_of(run: DrillRun) -> list[dict[str, Any]]:
    """The moments of an incident, in order; empty for any other run. A moment not reached
    (or not known, as detection without an alert or --detected-at) has ``at`` None."""
    if run.mode != Mode.INCIDENT or run.dry_run:
        return []
    detection = run.details.detection
    measurement = run.details.measurement
    detected = detection.detected_at if detection else None
    moments = (
        ("detection", detected),
        ("declaration", _declared(run)),
        ("fence", _phase_end(run, FENCE_PHASE)),
        ("service restored", run.restored_at),
        ("DR carrying", measurement.full_capacity if measurement else None),
    )
    chain, previous = [], None
    for name, at in moments:
        chain.append(
            {
                "moment": name,
                "at": at.isoformat() if at else None,
                "since_previous_seconds": _seconds(previous, at),
                "since_detection_seconds": _seconds(detected, at),
            }
        )
        previous = at or previous
    return chain


def _seconds(start: dt.datetime | None, end: dt.datetime | None) -> float | None:
    return round((end - start).total_seconds(), 3) if start and end else None


def _declared(run: DrillRun) -> dt.datetime | None:
    """T0; for a run stopped before it recorded T0, the declaration it was given."""
    detection = run.details.detection
    if run.t0 is not None or detection is None or detection.detection_seconds is None:
        return run.t0
    return detection.detected_at + dt.timedelta(seconds=detection.detection_seconds)


def detection_seconds(run: DrillRun) -> float | None:
    """declared_at - detected_at of an incident, when both are known."""
    detection = run.details.detection
    declared = _declared(run)
    if detection is None or declared is None:
        return None
    return round((declared - detection.detected_at).total_seconds(), 3)


def chain_markdown(chain: list[dict[str, Any]]) -> list[str]:
    if not chain:
        return []
    header = "| moment | when | since the one before | since detection |"
    lines = ["", "## Detection to DR carrying", "", header, "|---|---|---|---|"]
    for m in chain:
        lines.append(
            f"| {m['moment']} | {moment(m['at'])} | {duration(m['since_previous_seconds'])} | "
            f"{duration(m['since_detection_seconds'])} |"
        )
    if chain[0]["at"] is None:
        lines += ["", "Detection is not known: no alert proposed this incident and no "
                  "`--detected-at` was given."]  # fmt: skip
    return lines


__all__ = ["chain_markdown", "detection_chain_of", "detection_seconds"]
