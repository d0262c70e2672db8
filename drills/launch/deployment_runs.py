"""A deployment's flow run on the Prefect server: started, and followed to its end.

`drills serve run`, the dashboard's buttons and the takeovers a person asks for
(drills.launch.takeovers) all start their runs here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from drills.orchestrator.rest import Deployment, FlowRunState, PrefectRest

log = logging.getLogger("drills.launch.deployment_runs")

# The flow every takeover runs in, whatever its mode; its deployments differ by parameters.
DRILL_FLOW = "minimum-takeover-drill"


def start(
    api: PrefectRest,
    deployment: Deployment | str,
    parameters: dict[str, Any],
    *,
    idempotency_key: str | None = None,
    tags: Iterable[str] = (),
) -> FlowRunState:
    """Create a run of the deployment (or of the one of that name) and return it at once,
    without waiting for it."""
    if isinstance(deployment, str):
        deployment = api.deployment(deployment)
    run = api.create_flow_run(deployment.id, parameters, idempotency_key=idempotency_key, tags=tags)
    log.info("started %s: flow run %s (%s)", deployment.full_name, run.name, run.id)
    return run


def drill_mode(deployment: Deployment, parameters: Mapping[str, Any]) -> str | None:
    """The drill flow's mode for a run of ``deployment`` given ``parameters``; None for a
    run of another flow."""
    if deployment.flow_name != DRILL_FLOW:
        return None
    mode = parameters.get("mode", deployment.parameters.get("mode"))
    return str(mode) if mode else None


def follow(
    api: PrefectRest, run: FlowRunState, *, timeout: float, interval: float = 0.5
) -> Iterator[FlowRunState]:
    """The run as it stands, read again every ``interval`` seconds: the last one yielded is
    final, or the run as it stood when ``timeout`` seconds had passed."""
    deadline = time.monotonic() + timeout
    while True:
        yield run
        if run.final or time.monotonic() > deadline:
            return
        time.sleep(interval)
        run = api.flow_run(run.id)
