"""Where the orchestrator runs, for the orchestrator.placement readiness check: this
process's cluster (drills.checks.areas.orchestrator_placement.here) and the drills work pool's
workers, asked of the Prefect API (PREFECT_API_URL) here, since the checks never import Prefect."""

from __future__ import annotations

import dataclasses
import logging
import os

from drills.checks.areas.orchestrator_placement import here
from drills.checks.base import Placement, WorkerFact
from drills.errors import DrillError
from drills.orchestrator.rest import PrefectRest
from drills.orchestrator.serve import WORK_POOL

log = logging.getLogger("drills.orchestrator.placement")


def workers(
    api_url: str | None = None, pool: str = WORK_POOL
) -> tuple[tuple[WorkerFact, ...] | None, str | None]:
    """The pool's workers, online or not, and why they could not be listed: (None, None)
    without a Prefect API to ask, (None, the error) when it did not answer."""
    url = api_url if api_url is not None else os.environ.get("PREFECT_API_URL")
    if not url:
        return None, None
    try:
        with PrefectRest(url, timeout=3.0) as api:  # readiness must not hang on it
            found = api.workers(pool)
    except (DrillError, OSError) as exc:
        log.warning("could not list the workers of %s: %s", pool, exc)
        return None, str(exc)
    return tuple(WorkerFact(w.name, w.status == "ONLINE") for w in found), None


def gather(role: str, api_url: str | None = None) -> Placement:
    """This process's placement in the role it plays, with the pool's workers."""
    found, error = workers(api_url)
    return dataclasses.replace(here(role), workers=found, workers_error=error)
