"""What drill tests share: plan variants on a lab, a split-brain monitor, a state snapshot."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from sqlalchemy import select

from drills.plan import DrillPlan, load_plan
from drills.store.details import IncidentLink
from drills.store.history import HistoryStore
from drills.store.kinds import Mode
from drills.store.models import AuditEvent
from drills.takeover import crashpoints
from drills.takeover.journal import Journal
from drills.takeover.snapshot import Snapshot, take
from drills.takeover.steps.executor import ChangeExecutor
from drills.takeover.steps.rollback import safe_rollback
from drills.takeover.timeline import Timeline, utc_now
from drills.targets.sites import Targets
from drills_lab import topology
from drills_lab.kubeapi import NEVER_READY_ANNOTATION
from drills_lab.planfile import LabEndpoints, PlanOptions
from drills_lab.planfile import lab_plan as lab_plan_data
from drills_lab.runtime import LabInfo
from tests.support.cli import drills_process

# Placeholder addresses: nothing answers there, and no test that uses them expects it to.
OFFLINE_ENDPOINTS = LabEndpoints(
    kube={"primary": "https://127.0.0.2:6443", "dr": "https://127.0.0.3:6443"},
    site_endpoints={"primary": "http://127.0.0.2:8080", "dr": "http://127.0.0.3:8080"},
    service_port=8080,
    registries={"primary": "http://127.0.0.2:5000", "dr": "http://127.0.0.3:5000"},
    moto="http://127.0.0.1:5999",
    named="127.0.0.1:5353",
    tsig_name="drills-key",
    route53_zone_id=None,
    account="123456789012",
)


def offline_lab_plan_data(**endpoints: Any) -> dict[str, Any]:
    """The lab's plan over placeholder addresses, but for the ``endpoints`` given (the DNS a
    test starts, say): valid, for tests that reach no other service."""
    return lab_plan_data(dataclasses.replace(OFFLINE_ENDPOINTS, **endpoints), PlanOptions())


def offline_lab_plan_text() -> str:
    return yaml.safe_dump(offline_lab_plan_data(), sort_keys=False)


def lab_plan(info: LabInfo, change: Callable[[dict[str, Any]], None] | None = None) -> DrillPlan:
    """The lab's plan, optionally changed, written beside it so relative references resolve."""
    return load_plan(lab_plan_file(info, change))


def lab_plan_file(info: LabInfo, change: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """The lab's plan file, or a changed copy of it written beside it."""
    source = Path(info.state_dir) / "plan.yaml"
    if change is None:
        return source
    data = yaml.safe_load(source.read_text())
    change(data)
    variant = Path(info.state_dir) / f"variant-{time.monotonic_ns()}.yaml"
    variant.write_text(yaml.safe_dump(data, sort_keys=False))
    return variant


def audit_events(history: HistoryStore) -> list[AuditEvent]:
    """The store's audit log, oldest first."""
    with history.session() as s:
        return list(s.scalars(select(AuditEvent).order_by(AuditEvent.id)).all())


def snapshot(plan: DrillPlan) -> Snapshot:
    with Targets(plan) as targets:
        return take(plan, targets)


@dataclass
class SplitBrainMonitor:
    """Polls both site endpoints every 50 ms; records any moment both answer 200."""

    primary: str
    dr: str
    interval: float = 0.05
    both: list[float] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=lambda: {"primary": 0, "dr": 0})
    polls: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _ok(self, client: httpx.Client, url: str) -> bool:
        try:
            return client.get(url).status_code == 200
        except httpx.HTTPError:
            return False

    def _run(self) -> None:
        with httpx.Client(timeout=1.0) as client:
            while not self._stop.is_set():
                p, d = self._ok(client, self.primary), self._ok(client, self.dr)
                self.polls += 1
                self.seen["primary"] += p
                self.seen["dr"] += d
                if p and d:
                    self.both.append(time.time())
                self._stop.wait(self.interval)

    def __enter__(self) -> SplitBrainMonitor:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(2)


def back_to_normal(plan: DrillPlan, history: HistoryStore, run_id: str) -> None:
    """Undo a test's incident from its journal, in the safe order, so its lab can be reused;
    and close it in the history, as a failback would, so the plan serves from its primary
    there too (a plan held at DR refuses every new takeover)."""
    timeline = Timeline()
    with Targets(plan) as targets, timeline.phase("clean up"):
        safe_rollback(ChangeExecutor(targets, Journal(history, run_id)), plan, timeline)
    run = history.get_run(run_id)
    if run is not None and run.mode == Mode.INCIDENT:
        closed = IncidentLink(closed_at=utc_now(), closed_by="test clean-up")
        history.update_run(run_id, details=run.details.model_copy(update={"incident": closed}))


def stall_dr_bring_up(info: LabInfo) -> tuple[str, str]:
    """Make one critical DR workload never ready; returns its (namespace, name).

    A drill then waits in bring-up, up to its tier deadline, until it is cancelled:
    a window to cancel in that does not depend on how fast the machine is.
    """
    api = k8s_config.new_client_from_config(
        config_file=str(Path(info.state_dir) / "dr.kubeconfig"), context="dr"
    )
    namespace, name = topology.DRIFT_NEVER_READY
    body = {"metadata": {"annotations": {NEVER_READY_ANNOTATION: "true"}}}
    k8s.AppsV1Api(api).patch_namespaced_deployment(name, namespace, body)
    api.close()
    return namespace, name


def serving(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def drills_cli(
    *args: str, db: str, crash_at: str | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """`drills ARGS --db DB` in a process of its own, as an operator runs it; with
    ``crash_at``, the run dies by SIGKILL at that crash point."""
    env = {k: v for k, v in os.environ.items() if k != crashpoints.ENV}
    env["COLUMNS"] = "200"  # a table's cells unwrapped, as on a wide terminal
    if crash_at:
        env[crashpoints.ENV] = crash_at
    return drills_process([*args, "--db", db], timeout=timeout, env=env)
