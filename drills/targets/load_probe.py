"""A bounded open-model load through the public name, by loadtest (npm ``loadtest``).

loadtest's ``requestsPerSecond`` starts each request on a fixed schedule, whether earlier
ones have answered or not, and times each from the moment it was due to go out: a slow
answer cannot hold the next request back, so it cannot hide (no coordinated omission).
``maxRequests`` (rate × duration) ends the load only once every request has answered or
timed out, so the slowest are counted, not cut off at the end.

The name is resolved on the plan's authoritative DNS servers, as the smoke probe does, and
the load goes to the address they give with the name as Host: what clients reach.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from drills.errors import DrillError, TargetError
from drills.plan import LoadProbe
from drills.targets.dns import DnsTarget
from drills.targets.probe import is_ip, resolve_authoritative

# Where `make venv` installs it (package.json at the repository's root); DRILLS_LOADTEST
# names another copy's directory.
LOADTEST_DIR = Path(__file__).resolve().parents[2] / "node_modules" / "loadtest"
# The few lines that call loadtest's API and hand every request's latency back as JSON.
_RUNNER = r"""
import {pathToFileURL} from 'node:url'
const options = JSON.parse(process.argv[1])
const {loadTest} = await import(pathToFileURL(options.module).href)
const latencies = [], codes = {}, errors = {}
const started = Date.now()
const result = await loadTest({
  url: options.url, requestsPerSecond: options.rate, maxRequests: options.requests,
  maxSeconds: options.maxSeconds, timeout: options.timeoutMs, headers: options.headers,
  quiet: true, cores: 1,
  // loadtest times in whole milliseconds; each request is timed here in microseconds,
  // from the moment loadtest sends it to the end of its answer.
  requestGenerator: (_options, params, request, connect) => {
    const sent = process.hrtime.bigint()
    return request(params, answer => {
      answer.on('end', () => {
        const ms = Number(process.hrtime.bigint() - sent) / 1e6
        if (ms <= options.timeoutMs) latencies.push(ms)
      })
      connect(answer)
    })
  },
  statusCallback: (error, answer) => {
    if (answer) {
      codes[answer.statusCode] = (codes[answer.statusCode] || 0) + 1
    } else {
      const why = String(error).replace(/Connection \S+ failed/, 'Connection failed')
      errors[why] = (errors[why] || 0) + 1
    }
  },
})
process.stdout.write(JSON.stringify({
  latencies_ms: latencies, codes, errors, elapsed_s: (Date.now() - started) / 1000,
  loadtest: {totalRequests: result.totalRequests, totalErrors: result.totalErrors,
             effectiveRps: result.effectiveRps, percentiles: result.percentiles},
}))
"""


class LoadProbeError(DrillError):
    """The load could not be run, or its result cannot be trusted: never a pass."""


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile (0 < p ≤ 100) of values sorted ascending."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(p / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass(frozen=True)
class LoadResult:
    target: str  # "dr" or "primary"
    url: str
    address: str
    rate: int
    duration_s: float
    sent: int
    ok: int
    errors: int
    p50_s: float
    p95_s: float
    p99_s: float
    max_s: float
    throughput: float  # answers a second, over the whole load
    elapsed_s: float  # the load itself
    overhead_s: float  # resolving, starting the generator and reading its result
    codes: dict[str, int]
    failures: dict[str, int]

    @property
    def error_rate(self) -> float:
        return self.errors / self.sent if self.sent else 1.0

    def problems(self, probe: LoadProbe) -> list[str]:
        """Where it is over the plan's limits; empty when within them."""
        out = []
        if math.isnan(self.p95_s) or self.p95_s > probe.p95:
            out.append(f"p95 {_ms(self.p95_s)} over {_ms(probe.p95)}")
        if self.error_rate > probe.error_rate:
            out.append(f"error rate {self.error_rate:.1%} over {probe.error_rate:.1%}")
        return out

    def line(self) -> str:
        return (
            f"{self.target}: {self.rate}/s for {self.duration_s:g}s via {self.address}: "
            f"p50 {_ms(self.p50_s)}, p95 {_ms(self.p95_s)}, p99 {_ms(self.p99_s)}, "
            f"{self.throughput:.1f}/s, errors {self.error_rate:.1%}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target, "url": self.url, "address": self.address,
            "rate": self.rate, "duration_seconds": self.duration_s, "sent": self.sent,
            "ok": self.ok, "errors": self.errors, "error_rate": round(self.error_rate, 5),
            "p50_seconds": _num(self.p50_s), "p95_seconds": _num(self.p95_s),
            "p99_seconds": _num(self.p99_s), "max_seconds": _num(self.max_s),
            "throughput": round(self.throughput, 3), "elapsed_seconds": round(self.elapsed_s, 3),
            "overhead_seconds": round(self.overhead_s, 3), "codes": self.codes,
            "failures": self.failures, "line": self.line(),
        }  # fmt: skip


def _num(seconds: float) -> float | None:
    """A latency for JSON: none where nothing answered (NaN is not JSON)."""
    return None if math.isnan(seconds) else round(seconds, 6)


def _ms(seconds: float) -> str:
    return "—" if math.isnan(seconds) else f"{seconds * 1000:.0f} ms"


def loadtest_dir() -> Path:
    where = Path(os.environ.get("DRILLS_LOADTEST") or LOADTEST_DIR)
    if not (where / "index.js").is_file():
        raise LoadProbeError(
            f"loadtest is not installed ({where}): run `make venv` (npm ci) in the repository, "
            "or set DRILLS_LOADTEST to a loadtest package directory"
        )
    return where


def target_url(probe: LoadProbe, dns: DnsTarget, via: str | None = None) -> tuple[str, str, str]:
    """The URL at the address the plan's DNS gives now, that address, and the Host header.
    ``via``, when given, is the name (or address) asked in place of the URL's host: a
    practice reaches DR through a name of its own; the Host header stays the URL's."""
    parts = urlsplit(str(probe.url))
    host = via or parts.hostname or ""
    try:
        address = host if is_ip(host) else resolve_authoritative(dns, host)
    except (LookupError, TargetError) as exc:  # a misrouted or refused answer too
        raise LoadProbeError(f"load probe: {exc}") from None
    netloc = address + (f":{parts.port}" if parts.port else "")
    url = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
    return url, address, parts.netloc


def run_load(probe: LoadProbe, dns: DnsTarget, target: str, via: str | None = None) -> LoadResult:
    """The plan's load, through the name as its DNS answers now (or through ``via``);
    LoadProbeError when it cannot run or what it measured cannot be trusted."""
    begun = time.monotonic()
    url, address, host = target_url(probe, dns, via)
    requests = max(1, round(probe.rate * probe.duration))
    raw = _loadtest(url, host, probe, requests)
    total_s = time.monotonic() - begun
    latencies = sorted(float(v) / 1000.0 for v in raw["latencies_ms"])
    codes = {str(k): int(v) for k, v in raw["codes"].items()}
    failures = {str(k): int(v) for k, v in raw["errors"].items()}
    answered, failed = sum(codes.values()), sum(failures.values())
    if answered + failed != requests or len(latencies) != answered:
        raise LoadProbeError(
            f"load probe: loadtest accounted for {answered + failed} of {requests} requests "
            f"({len(latencies)} timed)"
        )
    ok = sum(n for code, n in codes.items() if code.startswith("2"))
    elapsed = float(raw["elapsed_s"])
    return LoadResult(
        target=target, url=str(probe.url), address=address, rate=probe.rate,
        duration_s=probe.duration, sent=requests, ok=ok, errors=requests - ok,
        p50_s=percentile(latencies, 50), p95_s=percentile(latencies, 95),
        p99_s=percentile(latencies, 99), max_s=latencies[-1] if latencies else math.nan,
        throughput=answered / elapsed if elapsed > 0 else 0.0, elapsed_s=elapsed,
        overhead_s=max(0.0, total_s - elapsed), codes=codes, failures=failures,
    )  # fmt: skip


def _loadtest(url: str, host: str, probe: LoadProbe, requests: int) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        raise LoadProbeError("load probe: node is not installed (Debian package nodejs)")
    options = {
        "module": str(loadtest_dir() / "index.js"), "url": url, "rate": probe.rate,
        "requests": requests, "timeoutMs": int(probe.timeout * 1000),
        # A hard stop past the last request's timeout: never reached unless loadtest hangs.
        "maxSeconds": probe.duration + probe.timeout + 5, "headers": {"host": host},
    }  # fmt: skip
    try:
        done = subprocess.run(
            [node, "--input-type=module", "-e", _RUNNER, json.dumps(options)],
            capture_output=True, text=True, timeout=probe.duration + probe.timeout + 30,
            check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise LoadProbeError("load probe: loadtest did not finish in time") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise LoadProbeError(f"load probe: loadtest failed: {last[:200]}")
    try:
        raw = json.loads(done.stdout)
    except ValueError:
        raise LoadProbeError("load probe: loadtest's result is not JSON") from None
    if not isinstance(raw, dict) or not {"latencies_ms", "codes", "errors"} <= raw.keys():
        raise LoadProbeError("load probe: loadtest's result lacks its fields")
    return raw
