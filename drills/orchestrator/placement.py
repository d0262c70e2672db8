"""Where the orchestrator runs, for the orchestrator.placement readiness check: this
process's cluster (drills.checks.placement.here) and the drills work pool's workers, asked
of the Prefect API (PREFECT_API_URL) here, since the checks never import Prefect."""

from __future__ import annotations

import dataclasses
import logging
import os

from drills.checks.base import Placement, WorkerFact
from drills.checks.placement import here
from drills.errors import DrillError
from drills.orchestrator.rest import PrefectRest
from drills.orchestrator.serve import WORK_POOL

log = logging.getLogger("drills.orchestrator.placement")


def workers(api_url: str | None = None, pool: str = WORK_POOL) -> tuple[WorkerFact, ...] | None:
    """The pool's workers, online or not; None without a reachable Prefect API."""
    url = api_url or os.environ.get("PREFECT_API_URL")
    if not url:
        return None
    try:
        with PrefectRest(url, timeout=3.0) as api:  # readiness must not hang on it
            found = api.workers(pool)
    except (DrillError, OSError) as exc:
        log.warning("could not list the workers of %s: %s", pool, exc)
        return None
    return tuple(WorkerFact(w.name, w.status == "ONLINE") for w in found)


def gather(role: str, api_url: str | None = None) -> Placement:
    """This process's placement in the role it plays, with the pool's workers."""
    return dataclasses.replace(here(role), workers=workers(api_url))
