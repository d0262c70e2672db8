"""A real Prometheus for the lab, scraping what the lab exports.

The scrape configuration is a list of jobs, each with targets and the labels they get,
so another exporter (a site's demand metrics, say) is one more :class:`ScrapeJob`.
Recording rules (record name → expression) give a derived series, such as the demand
in requests a second, a history of its own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml

from drills.errors import LabError
from drills_lab.loopback import loopback_client
from drills_lab.procs import ManagedProcess, free_port, require_binary

log = logging.getLogger("drills_lab.prometheus")

_START_TIMEOUT = 20.0
SCRAPE_INTERVAL_S = 1
RULES_FILE = "rules.yml"


@dataclass(frozen=True)
class ScrapeJob:
    name: str
    targets: Mapping[str, Mapping[str, str]]  # host:port → the labels its series get
    metrics_path: str = "/metrics"
    interval_s: int = SCRAPE_INTERVAL_S

    def config(self) -> dict[str, object]:
        return {
            "job_name": self.name,
            "scrape_interval": f"{self.interval_s}s",
            "scrape_timeout": f"{self.interval_s}s",
            "metrics_path": self.metrics_path,
            "static_configs": [
                {"targets": [target], "labels": dict(labels)}
                for target, labels in sorted(self.targets.items())
            ],
        }


@dataclass
class PrometheusServer:
    workdir: Path
    jobs: Sequence[ScrapeJob]
    rules: Mapping[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = 0
    _process: ManagedProcess | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.port = self.port or free_port(self.host)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def config_text(self) -> str:
        config: dict[str, object] = {
            "global": {"scrape_interval": f"{SCRAPE_INTERVAL_S}s",
                       "evaluation_interval": f"{SCRAPE_INTERVAL_S}s"},
            "scrape_configs": [job.config() for job in self.jobs],
        }  # fmt: skip
        if self.rules:
            config["rule_files"] = [RULES_FILE]
        return yaml.safe_dump(config, sort_keys=False)

    def rules_text(self) -> str:
        rules = [{"record": name, "expr": expr} for name, expr in self.rules.items()]
        return yaml.safe_dump({"groups": [{"name": "drills-lab", "rules": rules}]}, sort_keys=False)

    def start(self) -> None:
        binary = require_binary("prometheus", "prometheus")
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "prometheus.yml"
        config.write_text(self.config_text())
        if self.rules:
            (self.workdir / RULES_FILE).write_text(self.rules_text())
        process = ManagedProcess(
            f"prometheus {self.host}:{self.port}",
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address={self.host}:{self.port}",
                "--storage.tsdb.retention.time=2d",
                "--log.level=warn",
            ],
            log_path=self.workdir / "prometheus.log",
            cwd=self.workdir,
        )
        process.start(self._ready, timeout=_START_TIMEOUT)
        self._process = process
        log.info("prometheus on %s scraping %s", self.url, ", ".join(j.name for j in self.jobs))

    def _ready(self) -> bool:
        try:
            return loopback_client().get(f"{self.url}/-/ready", timeout=0.5).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_for_series(self, query: str, timeout_s: float = _START_TIMEOUT) -> None:
        """Return once ``query`` answers a sample: a lab handed out before its first recording
        would fail the checks that read it (`capacity.carry` errs on a query with no series)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                answer = loopback_client().get(
                    f"{self.url}/api/v1/query", params={"query": query}, timeout=2
                )
                if answer.json().get("data", {}).get("result"):
                    return
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.25)
        waited = f"{timeout_s:.0f} s"
        raise LabError(f"prometheus on {self.url} recorded no sample of {query} in {waited}")

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop()
            self._process = None
