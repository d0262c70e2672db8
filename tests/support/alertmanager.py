"""A real Alertmanager (Debian's prometheus-alertmanager) on a free port, for the gates."""

from __future__ import annotations

import datetime as dt
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from drills_lab.loopback import loopback_client
from drills_lab.procs import free_port
from tests.support.services import require_system_binary

CONFIG = """\
route:
  receiver: nobody
receivers:
  - name: nobody
"""


@dataclass(frozen=True)
class RunningAlertmanager:
    url: str

    def fire(self, labels: dict[str, str], *, starts_at: dt.datetime | None = None) -> str:
        """Post an alert that fires for the next hour; returns its startsAt as sent."""
        start = (starts_at or dt.datetime.now(dt.UTC)).replace(microsecond=0)
        alert = {
            "labels": labels,
            "startsAt": start.isoformat().replace("+00:00", "Z"),
            "endsAt": (start + dt.timedelta(hours=1)).isoformat().replace("+00:00", "Z"),
        }
        httpx.post(f"{self.url}/api/v2/alerts", json=[alert], timeout=5).raise_for_status()
        self._wait_listed(labels)
        return str(alert["startsAt"])

    def resolve(self, labels: dict[str, str], starts_at: str) -> None:
        """End the alert now: Alertmanager then notifies its receivers it resolved."""
        ended = dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")
        alert = {"labels": labels, "startsAt": starts_at, "endsAt": ended}
        httpx.post(f"{self.url}/api/v2/alerts", json=[alert], timeout=5).raise_for_status()

    def _wait_listed(self, labels: dict[str, str]) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            alerts = loopback_client().get(f"{self.url}/api/v2/alerts", timeout=5).json()
            if any(labels.items() <= a["labels"].items() for a in alerts):
                return
            time.sleep(0.1)
        raise AssertionError(f"Alertmanager never listed the alert {labels}")


def webhook_config(url: str, token: str | None) -> str:
    """Every alert to one webhook receiver (with a bearer token, when given), grouped by
    alertname and sent again quickly, so a test sees grouping, repeats and resolutions."""
    auth = (
        f"        http_config:\n          authorization:\n            type: Bearer\n"
        f"            credentials: {token}\n"
        if token
        else ""
    )
    return (
        "route:\n  receiver: drills\n  group_by: [alertname]\n  group_wait: 1s\n"
        "  group_interval: 1s\n  repeat_interval: 2s\n"
        "receivers:\n  - name: drills\n    webhook_configs:\n"
        f"      - url: {url}\n        send_resolved: true\n{auth}"
    )


@contextmanager
def alertmanager(state_dir: Path, config_text: str = CONFIG) -> Iterator[RunningAlertmanager]:
    binary = require_system_binary("prometheus-alertmanager", "prometheus-alertmanager")
    config = state_dir / "alertmanager.yml"
    config.write_text(config_text)
    port = free_port()
    argv = [binary, f"--config.file={config}", f"--storage.path={state_dir / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="]  # fmt: skip
    log = (state_dir / "alertmanager.log").open("wb")
    process = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if loopback_client().get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"Alertmanager did not start: {argv}")
            time.sleep(0.1)
        yield RunningAlertmanager(url)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
