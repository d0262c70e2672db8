"""The `recover-orphans` flow: runs whose orchestrator died are recovered from elsewhere.

Scheduled every minute on the shared work pool, so whichever worker is alive runs it: a
drill left behind is rolled back, an incident held, a failback undone or completed on its
side of the DNS switch, and people told once per outcome (drills.takeover.orphans).
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from drills.evidence import signed_history
from drills.takeover import recover_orphans as recover_all
from flows.events import notices_as_events


@flow(name="recover-orphans", log_prints=False)
def recover_orphans() -> list[dict[str, Any]]:
    """Find unfinished runs whose lease no live holder renews; roll drills back, hold
    incidents (never failed back automatically), take failbacks the way their DNS switch
    says, and notify."""
    logger = get_run_logger()
    history = signed_history()
    try:
        with notices_as_events():
            outcomes = recover_all(history)
    finally:
        history.close()
    for outcome in outcomes:
        logger.warning("orphaned run %s (%s): %s %s", outcome.run_id, outcome.mode,
                       outcome.action, outcome.status)  # fmt: skip
    if not outcomes:
        logger.info("no orphaned runs")
    return [outcome.to_json() for outcome in outcomes]
