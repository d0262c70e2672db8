"""The whole chain on a drifted lab: readiness stored, `drills metrics serve`, a real Prometheus
evaluating the shipped rules, a real Alertmanager, and a webhook here that receives the
blocking-readiness alert."""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from drills.checks.readiness import run_readiness
from drills.plan import load_plan
from drills.store.history import HistoryStore
from drills_lab.procs import ManagedProcess, free_port
from drills_lab.runtime import LabInfo
from tests.support.services import require_system_binary

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "drills-rules.yml"
ROOT = RULES.parents[2]
DEADLINE_S = 60.0


def _answers(url: str) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            return httpx.get(url, timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    return ready


class Webhook:
    """A receiver for Alertmanager's webhook: each POSTed body lands in ``received``."""

    def __init__(self) -> None:
        self.received: queue.Queue[dict[str, Any]] = queue.Queue()
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.put(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Webhook:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def alerts(self, deadline: float) -> Iterator[dict[str, Any]]:
        """Alerts as they arrive, until ``deadline`` (monotonic)."""
        while (left := deadline - time.monotonic()) > 0:
            try:
                body = self.received.get(timeout=left)
            except queue.Empty:
                return
            yield from body.get("alerts", [])


def _alertmanager(tmp: Path, webhook: str) -> tuple[ManagedProcess, str]:
    binary = require_system_binary("prometheus-alertmanager", "prometheus-alertmanager")
    config = {
        "route": {
            "receiver": "test", "group_by": ["alertname", "plan", "check"],
            "group_wait": "1s", "group_interval": "1s", "repeat_interval": "1h",
        },
        "receivers": [{"name": "test", "webhook_configs": [{"url": webhook}]}],
    }  # fmt: skip
    (tmp / "alertmanager.yml").write_text(yaml.safe_dump(config))
    address = f"127.0.0.1:{free_port()}"
    argv = [
        binary, f"--config.file={tmp / 'alertmanager.yml'}",
        f"--storage.path={tmp / 'alertmanager-data'}", f"--web.listen-address={address}",
        "--cluster.listen-address=",  # no gossip: a single instance
    ]  # fmt: skip
    return ManagedProcess("alertmanager", argv, log_path=tmp / "alertmanager.log"), address


def _prometheus(tmp: Path, target: str, alertmanager: str) -> tuple[ManagedProcess, str]:
    binary = require_system_binary("prometheus", "prometheus")
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]},
        "scrape_configs": [{"job_name": "drills", "static_configs": [{"targets": [target]}]}],
    }
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    address = f"127.0.0.1:{free_port()}"
    argv = [
        binary, f"--config.file={tmp / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp / 'prometheus-data'}", f"--web.listen-address={address}",
    ]  # fmt: skip
    return ManagedProcess("prometheus", argv, log_path=tmp / "prometheus.log"), address


def _exporter(tmp: Path, plan_path: Path, db_url: str) -> tuple[ManagedProcess, str]:
    port = free_port()
    argv = [sys.executable, "-m", "drills", "metrics", "serve", "--port", str(port),
            "--db", db_url]  # fmt: skip
    env = dict(os.environ, DRILLS_PLANS=str(plan_path))
    process = ManagedProcess("metrics", argv, log_path=tmp / "metrics.log", env=env, cwd=ROOT)
    return process, f"127.0.0.1:{port}"


@pytest.mark.timeout(300)
def test_a_blocking_readiness_failure_reaches_the_webhook(
    drift_lab: LabInfo, tmp_path: Path
) -> None:
    plan_path = Path(drift_lab.state_dir) / "plan.yaml"
    plan = load_plan(plan_path)
    db_url = f"sqlite:///{tmp_path / 'history.db'}"
    store = HistoryStore(db_url)
    try:
        report = run_readiness(plan, history=store)
    finally:
        store.close()
    blocking = {result.id for result in report.blocking}
    assert blocking, "the drifted lab has no blocking failure to alert on"

    started: list[ManagedProcess] = []
    with Webhook() as webhook:
        try:
            exporter, target = _exporter(tmp_path, plan_path, db_url)
            started.append(exporter)
            exporter.start(_answers(f"http://{target}/metrics"), timeout=30)
            metrics = httpx.get(f"http://{target}/metrics", timeout=10).text
            for check in blocking:
                assert f'check="{check}"' in metrics and f'plan="{plan.name}"' in metrics

            alertmanager, am_address = _alertmanager(tmp_path, webhook.url)
            started.append(alertmanager)
            alertmanager.start(_answers(f"http://{am_address}/-/ready"), timeout=30)
            prometheus, prom_address = _prometheus(tmp_path, target, am_address)
            started.append(prometheus)
            prometheus.start(_answers(f"http://{prom_address}/-/ready"), timeout=30)

            deadline = time.monotonic() + DEADLINE_S
            arrived = next(
                (
                    alert
                    for alert in webhook.alerts(deadline)
                    if alert["labels"].get("alertname") == "DrillsBlockingReadiness"
                ),
                None,
            )
        finally:
            for process in reversed(started):
                process.stop()
    assert arrived is not None, "no DrillsBlockingReadiness alert within a minute"
    labels, notes = arrived["labels"], arrived["annotations"]
    assert labels["plan"] == plan.name and labels["check"] in blocking
    assert labels["severity"] == "critical" and arrived["status"] == "firing"
    assert plan.name in notes["summary"] and labels["check"] in notes["summary"]
    assert notes["runbook_url"].endswith("#drillsblockingreadiness")
