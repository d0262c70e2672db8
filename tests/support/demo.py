"""A checkout as `make demo` then `make down` leave it: the lab's plan and files (.lab),
the Prefect server's state directory (.prefect-local) and the history (.drills), each
pointing at ports nothing answers on now. Tests put it where they run things, to show
that nothing of it is read."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

from drills.orchestrator.serve import ServeInfo
from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus
from drills.store.models import DrillRun
from drills_lab.procs import free_port
from drills_lab.state import LabInfo
from tests.support.ui import EXAMPLE_PLAN

DEMO_RUN = "demo-left-running"  # the demo's unfinished incident, in its own history


@dataclasses.dataclass(frozen=True)
class DemoLeftovers:
    checkout: Path
    lab_port: int  # where the demo's lab answered
    prefect_port: int  # where the demo's Prefect server answered


def leave_demo_state(checkout: Path, *, server_pid: int) -> DemoLeftovers:
    """Write a demo's leftovers into ``checkout``; its serve.json names ``server_pid``."""
    lab_port, prefect_port = free_port(), free_port()
    lab = checkout / ".lab"
    lab.mkdir(parents=True)
    # Named as the tests' lab plans are: any mix-up of the two would show.
    plan = EXAMPLE_PLAN.read_text().replace("name: gpu-platform", "name: lab", 1)
    (lab / "plan.yaml").write_text(plan)
    lab_info = LabInfo(
        state_dir=str(lab), pid=server_pid, drift=False, started_at=0.0, dns_provider="rfc2136",
        registry_kind="oci", kube={"primary": f"https://127.0.0.1:{lab_port}"},
    )  # fmt: skip
    (lab / "lab.json").write_text(json.dumps(dataclasses.asdict(lab_info)))
    history = HistoryStore(f"sqlite:///{checkout / '.drills' / 'history.db'}")
    history.create_run(
        DrillRun(
            id=DEMO_RUN, plan="lab", plan_digest="sha256:x", mode=Mode.INCIDENT, dry_run=False,
            operator="demo", status=RunStatus.RUNNING, started_at=dt.datetime.now(dt.UTC),
        )
    )  # fmt: skip
    history.close()
    state = checkout / ".prefect-local"
    (state / "home").mkdir(parents=True)
    url = f"http://127.0.0.1:{prefect_port}"
    serve_info = ServeInfo(
        state_dir=str(state), project_dir=str(checkout), api_url=f"{url}/api", ui_url=url,
        db_url="sqlite:///.drills/history.db", server_pid=server_pid, worker_pid=None,
        started_at=dt.datetime.now(dt.UTC).isoformat(),
    )  # fmt: skip
    (state / "serve.json").write_text(json.dumps(dataclasses.asdict(serve_info)))
    return DemoLeftovers(checkout, lab_port, prefect_port)
