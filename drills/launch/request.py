"""A run's request, built once from its inputs, and the takeover that runs it.

`drills run` and the `minimum-takeover-drill` flow both build their ``DrillRequest`` here
and hand it to :func:`takeover`, so a run asked for in a terminal and one started by a
worker are the same run.
"""

from __future__ import annotations

import datetime as dt
import getpass
from pathlib import Path

from drills.plan import DrillPlan
from drills.store.history import HistoryStore
from drills.store.kinds import Mode
from drills.takeover.drill import Drill, DrillHooks, DrillRequest
from drills.takeover.failback import Failback
from drills.takeover.lease import LEASE_S
from drills.takeover.practice import Practice


def drill_request(
    plan: DrillPlan,
    plan_path: str | Path,
    *,
    mode: str,
    operator: str | None,
    reason: str = "",
    dry_run: bool = False,
    declared_at: dt.datetime | None = None,
    detected_at: dt.datetime | None = None,
    proposal: str | None = None,
    force_unfenced: bool = False,
    tier_deadline_s: float = 600.0,
    sync_deadline_s: float = 300.0,
    lease_s: float = LEASE_S,
    scheduled: bool = False,
    flow_run_id: str | None = None,
    ignore_gates: bool = False,
    accept_blocking: tuple[str, ...] = (),
) -> DrillRequest:
    """The request of a run of ``plan`` (already narrowed to an application, if any).

    ``operator`` None is whoever runs this process; the plan file is kept by its absolute
    path, so `drills recover` can load it again from anywhere. The request checks the
    combinations itself (a detection time belongs to an incident, say): a ValueError.
    """
    return DrillRequest(
        plan,
        mode=Mode(mode),
        dry_run=dry_run,
        operator=getpass.getuser() if operator is None else operator,
        reason=reason,
        declared_at=declared_at,
        detected_at=detected_at,
        proposal=proposal,
        force_unfenced=force_unfenced,
        tier_deadline_s=tier_deadline_s,
        sync_deadline_s=sync_deadline_s,
        lease_s=lease_s,
        scheduled=scheduled,
        flow_run_id=flow_run_id,
        plan_path=str(Path(plan_path).resolve()),
        ignore_gates=ignore_gates,
        accept_blocking=accept_blocking,
    )


def takeover(request: DrillRequest, history: HistoryStore, hooks: DrillHooks) -> Drill:
    """What runs the request: a failback brings production home, a practice leaves it
    alone, and a drill or an incident takes over."""
    kind = {Mode.FAILBACK: Failback, Mode.PRACTICE: Practice}.get(request.mode, Drill)
    return kind(request, history, hooks)
