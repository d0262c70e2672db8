"""Names the local server, the warm runner (warm_runner.py), its standby and the dashboard
share."""

from __future__ import annotations

# The incident deployment of prefect.yaml: the one the warm runner serves.
INCIDENT_DEPLOYMENT = "minimum-takeover-drill/declare-incident"
# What the warm runner logs once a standby has everything imported and can take a run;
# `drills serve` waits for it in warm.log.
WARM_READY = "ready (standby pid"
# The warm runner's standby: a module of the flows, since it imports Prefect and the flow,
# started as `python -m`; it prints this line once all of that is imported.
WARM_STANDBY_MODULE = "flows.warm_standby"
STANDBY_READY_LINE = "ready"
# The warm runner itself, started by `drills serve` as `python -m`.
WARM_RUNNER_MODULE = "drills.orchestrator.warm_runner"
# A declared incident is scheduled this far ahead, and the warm runner takes runs due
# within it: the worker (which `drills serve` runs without prefetch) cannot see the run
# before the warm runner has had several polls to claim it. Were both to look at once,
# the worker would win one declaration in a few and start it cold. With no warm runner,
# the worker still starts it, this much later.
WARM_HEAD_START_S = 1.5

__all__ = [
    "INCIDENT_DEPLOYMENT",
    "STANDBY_READY_LINE",
    "WARM_HEAD_START_S",
    "WARM_READY",
    "WARM_RUNNER_MODULE",
    "WARM_STANDBY_MODULE",
]
