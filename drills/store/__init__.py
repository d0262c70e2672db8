"""The history store: runs, timelines, journals, readiness snapshots, audit log."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drills.faces import lazy_face

if TYPE_CHECKING:
    from drills.store.audit import recent_events
    from drills.store.chain_report import ChainReport
    from drills.store.chain_verify import verify_store
    from drills.store.checkpoints import ChainTamperedError
    from drills.store.detection_chain import detection_chain_of, detection_seconds
    from drills.store.fleet import PlanFacts, fleet_facts
    from drills.store.history import HistoryStore, database_url, make_engine
    from drills.store.kinds import Mode, RunStatus, Verdict
    from drills.store.models import DrillRun
    from drills.store.outage import is_store_outage, outage_text
    from drills.store.proposals import DECIDED_STATES as PROPOSAL_DECIDED_STATES
    from drills.store.proposals import PENDING as PROPOSAL_PENDING
    from drills.store.proposals import RESOLVED as PROPOSAL_RESOLVED
    from drills.store.proposals import Proposal
    from drills.store.proposals import listing as proposal_listing
    from drills.store.prune import prune_if_due, prune_readiness
    from drills.store.report import render_markdown, report_data
    from drills.store.report_slo import load_summary, slo_summary
    from drills.store.runs import first_run_since, plan_names, rto_rows, run_of_flow_run, runs_page
    from drills.store.schema import SchemaError
    from drills.store.schema import state as schema_state
    from drills.store.schema import upgrade as schema_upgrade
    from drills.store.serving import RecordedServing, Site, recorded_serving, recorded_serving_of
    from drills.store.sign_in import record_failure as record_sign_in_failure
    from drills.store.sign_in import record_success as record_sign_in_success
    from drills.store.sign_in import subjects as sign_in_subjects
    from drills.store.sign_in import wait_s as sign_in_wait_s
    from drills.store.url import StoreUnreachableError, StoreUrlError, store_errors

__all__ = [
    "PROPOSAL_DECIDED_STATES",
    "PROPOSAL_PENDING",
    "PROPOSAL_RESOLVED",
    "ChainReport",
    "ChainTamperedError",
    "DrillRun",
    "HistoryStore",
    "Mode",
    "PlanFacts",
    "Proposal",
    "RecordedServing",
    "RunStatus",
    "SchemaError",
    "Site",
    "StoreUnreachableError",
    "StoreUrlError",
    "Verdict",
    "database_url",
    "detection_chain_of",
    "detection_seconds",
    "first_run_since",
    "fleet_facts",
    "is_store_outage",
    "load_summary",
    "make_engine",
    "outage_text",
    "plan_names",
    "proposal_listing",
    "prune_if_due",
    "prune_readiness",
    "recent_events",
    "record_sign_in_failure",
    "record_sign_in_success",
    "recorded_serving",
    "recorded_serving_of",
    "render_markdown",
    "report_data",
    "rto_rows",
    "run_of_flow_run",
    "runs_page",
    "schema_state",
    "schema_upgrade",
    "sign_in_subjects",
    "sign_in_wait_s",
    "slo_summary",
    "store_errors",
    "verify_store",
]

# Each name is imported from its module when first asked for, so that importing the
# package costs nothing until one is used.
__getattr__ = lazy_face(
    __name__,
    {
        "audit": ["recent_events"],
        "chain_report": ["ChainReport"],
        "chain_verify": ["verify_store"],
        "checkpoints": ["ChainTamperedError"],
        "detection_chain": ["detection_chain_of", "detection_seconds"],
        "fleet": ["PlanFacts", "fleet_facts"],
        "history": ["HistoryStore", "database_url", "make_engine"],
        "kinds": ["Mode", "RunStatus", "Verdict"],
        "models": ["DrillRun"],
        "outage": ["is_store_outage", "outage_text"],
        "proposals": [
            "DECIDED_STATES as PROPOSAL_DECIDED_STATES",
            "PENDING as PROPOSAL_PENDING",
            "RESOLVED as PROPOSAL_RESOLVED",
            "Proposal",
            "listing as proposal_listing",
        ],
        "prune": ["prune_if_due", "prune_readiness"],
        "report": ["render_markdown", "report_data"],
        "report_slo": ["load_summary", "slo_summary"],
        "runs": ["first_run_since", "plan_names", "rto_rows", "run_of_flow_run", "runs_page"],
        "schema": ["SchemaError", "state as schema_state", "upgrade as schema_upgrade"],
        "serving": ["RecordedServing", "Site", "recorded_serving", "recorded_serving_of"],
        "sign_in": [
            "record_failure as record_sign_in_failure",
            "record_success as record_sign_in_success",
            "subjects as sign_in_subjects",
            "wait_s as sign_in_wait_s",
        ],
        "url": ["StoreUnreachableError", "StoreUrlError", "store_errors"],
    },
)
