"""The one way the front ends start runs: the CLI, the dashboard and the flows all come here.

request builds a run's ``DrillRequest`` from its inputs and picks what runs it (a drill, a
practice or a failback); deployments declares an incident, asks for a failback, starts a
deployment's flow run on the Prefect server and follows it to its end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drills.faces import lazy_face

if TYPE_CHECKING:
    from drills.launch.deployment_runs import DRILL_FLOW, drill_mode, follow, start
    from drills.launch.request import drill_request, takeover
    from drills.launch.takeovers import Consent, approve_proposal, declare, fail_back

__all__ = [
    "DRILL_FLOW",
    "Consent",
    "approve_proposal",
    "declare",
    "drill_mode",
    "drill_request",
    "fail_back",
    "follow",
    "start",
    "takeover",
]

# Each name is imported from its module when first asked for, so that importing the
# package costs nothing until one is used.
__getattr__ = lazy_face(
    __name__,
    {
        "deployment_runs": ["DRILL_FLOW", "drill_mode", "follow", "start"],
        "request": ["drill_request", "takeover"],
        "takeovers": ["Consent", "approve_proposal", "declare", "fail_back"],
    },
)
