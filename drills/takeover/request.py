"""What a run is asked to do, how a caller takes part in it, and what it gives back.

The words a run and its callers share (the CLI, a flow, the dashboard's launcher, a
test): a ``Drill`` takes a ``DrillRequest`` and ``DrillHooks`` and returns a
``DrillResult``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from drills.checks.base import CheckRegistry
from drills.errors import DrillError
from drills.plan import DrillPlan
from drills.store.details import Approval
from drills.store.kinds import Mode, RunStatus, Verdict
from drills.takeover.detection import detection_problem
from drills.takeover.lease import LEASE_S
from drills.takeover.measure import Measurement
from drills.takeover.steps.executor import PlannedChange
from drills.takeover.timeline import Listener, Timeline

PhaseRunner = Callable[[str, Callable[[], Any]], Any]


class DrillAborted(DrillError):  # noqa: N818 - it is not an error of ours: the drill stopped on purpose
    """Stopped before any change: a blocking readiness failure, or approval refused."""


@dataclass(frozen=True)
class DrillRequest:
    plan: DrillPlan
    mode: Mode = Mode.DRILL
    dry_run: bool = False
    operator: str = "unknown"
    reason: str = ""
    declared_at: dt.datetime | None = None  # an incident's T0: when a person declared it
    # An incident's detection, before T0: an alert's startsAt (``proposal`` approved) or
    # the time an operator gives.
    detected_at: dt.datetime | None = None
    proposal: str | None = None
    force_unfenced: bool = False
    tier_deadline_s: float = 600.0
    fence_deadline_s: float = 60.0
    dns_deadline_s: float = 120.0
    sync_deadline_s: float = 300.0  # a failback's final sync: every DR write at the primary
    run_id: str | None = None
    flow_run_id: str | None = None
    plan_path: str | None = None  # kept in the run record, so `drills recover` can reload it
    lease_s: float = LEASE_S
    # How long a run that ended waits for a history store that does not answer, to write
    # its record; past it, the record waits in the run's write-ahead file.
    store_wait_s: float = 600.0
    # A scheduled run that a gate holds back is skipped (recorded), not refused.
    scheduled: bool = False
    # Go on when a gate cannot be verified (Alertmanager does not answer); audited.
    ignore_gates: bool = False
    # A drill or practice goes on past these blocking readiness failures (audited): to see
    # how far a DR known to be short gets, such as one that fails capacity.carry.
    accept_blocking: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Callers outside typed code (a flow's parameters, a test) may give the plain word.
        object.__setattr__(self, "mode", Mode(self.mode))
        if self.detected_at is not None and self.mode != Mode.INCIDENT:
            raise ValueError("a detection time (detected_at) belongs to an incident only")
        if self.accept_blocking and not self.mode.rehearsal:
            raise ValueError("accepting blocking readiness failures belongs to a drill or "
                             "a practice: an incident is never blocked by them")  # fmt: skip
        problem = detection_problem(self.detected_at, self.declared_at)
        if problem:
            raise ValueError(problem)


@dataclass
class DrillHooks:
    """How a caller (CLI, flow, test) takes part in a run."""

    approve: Callable[[DrillRequest], Approval] | None = None
    confirm: Callable[[list[PlannedChange]], bool] | None = None
    listener: Listener | None = None
    crash_point: Callable[[str], None] | None = None
    run_phase: PhaseRunner = field(default=lambda _name, body: body())
    # The readiness checks of the preflight (every check of drills by default). The
    # guards before the first change (sites.distinct) always use drills' own.
    checks: CheckRegistry | None = None


@dataclass
class DrillResult:
    run_id: str
    status: RunStatus
    verdict: Verdict | None
    measurement: Measurement | None
    timeline: Timeline
    planned: list[PlannedChange] = field(default_factory=list)
    # None: not verified (the rollback itself failed before the state could be compared).
    drift: dict[str, Any] | None = field(default_factory=dict)
    error: str | None = None


__all__ = [
    "DrillAborted",
    "DrillHooks",
    "DrillRequest",
    "DrillResult",
    "PhaseRunner",
]
