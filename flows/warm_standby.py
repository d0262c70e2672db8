"""The warm runner's standby: a process that has imported Prefect, the drill flow, drills and
the SDKs its checks use before any run is due, says so, then runs the one flow run whose id
it is given on stdin. The runner (drills.orchestrator.warm_runner) starts one at a time,
so that a declared incident starts in a process that is already warm.

    python -m flows.warm_standby
"""

from __future__ import annotations

import os
import sys

from drills.orchestrator import STANDBY_READY_LINE


def standby() -> int:
    """Import what a flow run of the drill needs, say so, then run the run it is given."""
    from uuid import UUID

    from prefect.engine import handle_engine_signals
    from prefect.flow_engine import flow_run_logger, load_flow_run, run_flow

    from drills.checks import load_checks
    from flows.drill import minimum_takeover_drill

    load_checks()  # the check modules, and the SDKs they import
    print(STANDBY_READY_LINE, flush=True)
    # Nobody reads the pipe after this line: what the run prints goes to the runner's log.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    line = sys.stdin.readline().strip()
    if not line:  # the runner stopped without a run for us
        return 0
    flow_run_id = UUID(line)
    os.environ["PREFECT__FLOW_RUN_ID"] = line
    with handle_engine_signals(flow_run_id):
        flow_run = load_flow_run(flow_run_id=flow_run_id)
        logger = flow_run_logger(flow_run)  # as `python -m prefect.engine` passes it
        run_flow(minimum_takeover_drill, flow_run=flow_run, error_logger=logger)  # type: ignore[arg-type]
    return 0


__all__ = ["standby"]

if __name__ == "__main__":
    sys.exit(standby())
