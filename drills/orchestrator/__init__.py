"""Prefect, seen from drills: a local server and worker (serve), the one REST client of a
server (rest), and what the CLI and the dashboard do with flow runs (flow_runs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drills.faces import lazy_face

if TYPE_CHECKING:
    from drills.orchestrator.flow_runs import (
        CancelOutcome,
        DeploymentInfo,
        FlowRunProgress,
        cancel_flow_run,
        deployment_info,
        drill_run_of,
        flow_run_progress,
    )
    from drills.orchestrator.names import INCIDENT_DEPLOYMENT, STANDBY_READY_LINE
    from drills.orchestrator.plan_schedule import deployment_schedules
    from drills.orchestrator.receiver import DEFAULT_PORT as RECEIVER_PORT
    from drills.orchestrator.receiver import PATH as RECEIVER_PATH
    from drills.orchestrator.receiver import READY_LINE as RECEIVER_READY_LINE
    from drills.orchestrator.receiver import REFUSAL_ACTION, PlanCache, Receiver
    from drills.orchestrator.receiver import make_server as make_receiver_server
    from drills.orchestrator.receiver_process import ensure_receiver, receiver_running
    from drills.orchestrator.rest import (
        Deployment,
        FlowRunState,
        PrefectRest,
        auth_headers,
        describe_schedule,
    )
    from drills.orchestrator.serve import DEFAULT_STATE_DIR as SERVE_STATE_DIR
    from drills.orchestrator.serve import WORK_POOL, WORKER_NAME, ServeInfo, warm_running
    from drills.orchestrator.serve import down as serve_down
    from drills.orchestrator.serve import history_url as local_history_url
    from drills.orchestrator.serve import redacted as redacted_url
    from drills.orchestrator.serve import running as serve_running
    from drills.orchestrator.serve import up as serve_up
    from drills.orchestrator.worker_placement import gather

__all__ = [
    "INCIDENT_DEPLOYMENT",
    "RECEIVER_PATH",
    "RECEIVER_PORT",
    "RECEIVER_READY_LINE",
    "REFUSAL_ACTION",
    "SERVE_STATE_DIR",
    "STANDBY_READY_LINE",
    "WORKER_NAME",
    "WORK_POOL",
    "CancelOutcome",
    "Deployment",
    "DeploymentInfo",
    "FlowRunProgress",
    "FlowRunState",
    "PlanCache",
    "PrefectRest",
    "Receiver",
    "ServeInfo",
    "auth_headers",
    "cancel_flow_run",
    "deployment_info",
    "deployment_schedules",
    "describe_schedule",
    "drill_run_of",
    "ensure_receiver",
    "flow_run_progress",
    "gather",
    "local_history_url",
    "make_receiver_server",
    "receiver_running",
    "redacted_url",
    "serve_down",
    "serve_running",
    "serve_up",
    "warm_running",
]

# Each name is imported from its module when first asked for, so that importing the
# package costs nothing until one is used.
__getattr__ = lazy_face(
    __name__,
    {
        "flow_runs": [
            "CancelOutcome",
            "DeploymentInfo",
            "FlowRunProgress",
            "cancel_flow_run",
            "deployment_info",
            "drill_run_of",
            "flow_run_progress",
        ],
        "names": ["INCIDENT_DEPLOYMENT", "STANDBY_READY_LINE"],
        "plan_schedule": ["deployment_schedules"],
        "receiver": [
            "PlanCache",
            "PATH as RECEIVER_PATH",
            "DEFAULT_PORT as RECEIVER_PORT",
            "READY_LINE as RECEIVER_READY_LINE",
            "REFUSAL_ACTION",
            "Receiver",
            "make_server as make_receiver_server",
        ],
        "receiver_process": ["ensure_receiver", "receiver_running"],
        "rest": ["Deployment", "FlowRunState", "PrefectRest", "auth_headers", "describe_schedule"],
        "serve": [
            "DEFAULT_STATE_DIR as SERVE_STATE_DIR",
            "ServeInfo",
            "WORKER_NAME",
            "WORK_POOL",
            "history_url as local_history_url",
            "redacted as redacted_url",
            "down as serve_down",
            "running as serve_running",
            "up as serve_up",
            "warm_running",
        ],
        "worker_placement": ["gather"],
    },
)
