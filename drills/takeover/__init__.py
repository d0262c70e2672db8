"""The takeover: a drill or an incident, its journal, crash recovery and leases."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drills.faces import lazy_face

if TYPE_CHECKING:
    from drills.takeover.cancellation import cancel_on_signals
    from drills.takeover.crashpoints import point as crashpoint
    from drills.takeover.crashpoints import wanted as crashpoints_wanted
    from drills.takeover.detection import parse_moment
    from drills.takeover.drill import (
        Approval,
        Drill,
        DrillAborted,
        DrillHooks,
        DrillRequest,
        DrillResult,
        approval_question,
    )
    from drills.takeover.failback_request import FAILBACK_ACTION
    from drills.takeover.incident import DECLARE_ACTION, Declaration, audit_decision
    from drills.takeover.lease import LEASE_S, LeaseHeldError, UnfinishedRunError
    from drills.takeover.orphans import recover_orphans
    from drills.takeover.proposals import ACTIONS as PROPOSAL_ACTIONS
    from drills.takeover.proposals import APPROVE_ACTION, DISMISS_ACTION
    from drills.takeover.proposals import Approval as ProposalApproval
    from drills.takeover.proposals import dismiss as dismiss_proposal
    from drills.takeover.recover import (
        Action,
        RecoverReport,
        RecoverStatus,
        pick_run,
        plan_of,
        recover_run,
    )
    from drills.takeover.status import serving_status
    from drills.takeover.steps.executor import PlannedChange
    from drills.takeover.timeline import Listener, PhaseRecord, StepRecord, every

__all__ = [
    "APPROVE_ACTION",
    "DECLARE_ACTION",
    "DISMISS_ACTION",
    "FAILBACK_ACTION",
    "LEASE_S",
    "PROPOSAL_ACTIONS",
    "Action",
    "Approval",
    "Declaration",
    "Drill",
    "DrillAborted",
    "DrillHooks",
    "DrillRequest",
    "DrillResult",
    "LeaseHeldError",
    "Listener",
    "PhaseRecord",
    "PlannedChange",
    "ProposalApproval",
    "RecoverReport",
    "RecoverStatus",
    "StepRecord",
    "UnfinishedRunError",
    "approval_question",
    "audit_decision",
    "cancel_on_signals",
    "crashpoint",
    "crashpoints_wanted",
    "dismiss_proposal",
    "every",
    "parse_moment",
    "pick_run",
    "plan_of",
    "recover_orphans",
    "recover_run",
    "serving_status",
]

# Each name is imported from its module when first asked for, so that importing the
# package costs nothing until one is used.
__getattr__ = lazy_face(
    __name__,
    {
        "cancellation": ["cancel_on_signals"],
        "crashpoints": ["point as crashpoint", "wanted as crashpoints_wanted"],
        "detection": ["parse_moment"],
        "drill": [
            "Approval",
            "Drill",
            "DrillAborted",
            "DrillHooks",
            "DrillRequest",
            "DrillResult",
            "approval_question",
        ],
        "failback_request": ["FAILBACK_ACTION"],
        "incident": ["DECLARE_ACTION", "Declaration", "audit_decision"],
        "lease": ["LEASE_S", "LeaseHeldError", "UnfinishedRunError"],
        "orphans": ["recover_orphans"],
        "proposals": [
            "APPROVE_ACTION",
            "DISMISS_ACTION",
            "ACTIONS as PROPOSAL_ACTIONS",
            "Approval as ProposalApproval",
            "dismiss as dismiss_proposal",
        ],
        "recover": [
            "Action",
            "RecoverReport",
            "RecoverStatus",
            "pick_run",
            "plan_of",
            "recover_run",
        ],
        "status": ["serving_status"],
        "steps.executor": ["PlannedChange"],
        "timeline": ["Listener", "PhaseRecord", "StepRecord", "every"],
    },
)
