"""The notice of an incident whose SLOs did not hold after the switch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from drills.notify.deliver import notify
from drills.notify.events import EventKind, Notice, Severity
from drills.plan import DrillPlan


def slo_breach(plan: str, run_id: str, failed: Sequence[Mapping[str, Any]]) -> Notice:
    """``failed``: the SLO records (drills.takeover.slo_watch) that did not hold."""
    names = ", ".join(str(r["name"]) for r in failed)
    return Notice(
        EventKind.INCIDENT_SLO_BREACH,
        plan,
        f"{plan}: incident {run_id}: SLO not holding at DR: {names}",
        tuple(str(r["line"]) for r in failed),
        Severity.WARNING,
        (
            "DR serves but not at the promised level: look at its capacity and latency "
            "(the run's report lists each SLO's values); the incident is not rolled back.",
        ),
        "history",
        {"run_id": run_id, "mode": "incident", "slo": [dict(r) for r in failed]},
    )


def announce_slo_breach(plan: DrillPlan, run_id: str, failed: Sequence[Mapping[str, Any]]) -> None:
    notify([slo_breach(plan.name, run_id, failed)], plan)
