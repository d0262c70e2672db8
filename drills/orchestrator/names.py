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
# The worker beside it takes a run only this long after it is due (a negative Prefect
# prefetch): the warm runner, which polls every 0.2 s, has that long to claim a declared
# incident alone. Were both to look at once, the worker would win one declaration in a
# few and start it cold. With no warm runner, the worker still starts it, this much later.
# Whole seconds: Prefect's worker truncates its prefetch to an int.
WARM_HEAD_START_S = 2

__all__ = [
    "INCIDENT_DEPLOYMENT",
    "STANDBY_READY_LINE",
    "WARM_HEAD_START_S",
    "WARM_READY",
    "WARM_RUNNER_MODULE",
    "WARM_STANDBY_MODULE",
]
