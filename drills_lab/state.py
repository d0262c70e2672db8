"""What a running lab records about itself, readable without importing the lab.

`drills lab status` and `drills lab down` only need this; keeping it apart
from the runtime keeps moto, the registries and the Kubernetes stand-in out of
every CLI start-up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from drills.errors import LabError

STATE_FILE = "lab.json"
ERROR_FILE = "lab.error"


@dataclass
class LabInfo:
    """What `lab.json` records: enough for `lab status`, `lab down` and tests."""

    state_dir: str
    pid: int
    drift: bool
    started_at: float
    dns_provider: str
    registry_kind: str
    kube: dict[str, str] = field(default_factory=dict)
    endpoints: dict[str, str] = field(default_factory=dict)
    registries: dict[str, str] = field(default_factory=dict)
    moto: str = ""
    dns_server: str = ""
    startup_seconds: float = 0.0
    drift_scheduling: bool = False
    low_priority_work: bool = False
    drift_training: bool = False  # the validation job's trainer tag fails its driver check at DR
    slo: bool = True  # the plan's SLOs and load probe (written only where Prometheus records)
    reverse_replication: bool = True  # DR's writes copied back to the primary while DR serves
    prometheus: str = ""  # its URL; "" when Prometheus is not installed
    drift_capacity: bool = False
    demand: str = ""  # how the lab's demand is made and recorded, as `lab status` says it


def read_info(state_dir: Path) -> LabInfo | None:
    path = state_dir / STATE_FILE
    if not path.exists():
        return None
    try:
        return LabInfo(**json.loads(path.read_text()))
    except (ValueError, TypeError) as exc:
        raise LabError(f"{path} is unreadable ({exc}); remove it and run `drills lab up`") from exc
