"""What a lab site can serve, and the metrics of what it served.

Each ready replica of the critical inference workloads serves ``PER_REPLICA_RPS`` requests a
second at ``BASE_LATENCY_S``. The site is one queue in front of them: a request waits behind
the work already admitted, so below capacity it takes about the base latency, and past
capacity the wait grows with the queue until a request that would wait more than
``MAX_QUEUE_S`` is shed with a 503, as an overloaded gateway does.

The counters are exported in Prometheus's text format with the site as a label, so the
lab's Prometheus (and an SLO written against a real service) reads them unchanged.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

from drills_lab import topology

PER_REPLICA_RPS = 20.0
BASE_LATENCY_S = 0.02
MAX_QUEUE_S = 0.5
TOKENS_PER_REQUEST = 64
BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

REQUESTS = "drills_lab_requests_total"
DURATION = "drills_lab_request_duration_seconds"
TOKENS = "drills_lab_tokens_generated_total"
READY = "drills_lab_ready_replicas"
CAPACITY = "drills_lab_capacity_rps"
# The handlers a site counts requests by: the service its users and the load probe call, and
# its health path, which the drill's own checks and probes call (of a standby site too, so
# an SLO on the service's errors leaves them out, as a real one leaves out health checks).
SERVICE_PATH = "/generate"
HEALTH_PATH = "/healthz"


class ObjectReader(Protocol):
    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None: ...


def ready_replicas(store: ObjectReader) -> dict[str, int]:
    """Ready replicas of each critical workload, by ``namespace/name``."""
    out: dict[str, int] = {}
    for w in topology.critical_workloads():
        resource = "deployments" if w.kind == "Deployment" else "statefulsets"
        obj = store.get(resource, w.namespace, w.name) or {}
        out[f"{w.namespace}/{w.name}"] = int((obj.get("status") or {}).get("readyReplicas") or 0)
    return out


def capacity_rps(ready: Mapping[str, int]) -> float:
    """Requests a second the site serves: its scarcest inference workload decides."""
    return min(
        (ready.get(key, 0) * PER_REPLICA_RPS for key in topology.INFERENCE_WORKLOADS),
        default=0.0,
    )


class SiteLoad:
    """The queue of one site and its counters; thread-safe, as every request thread and the
    demand generator admit through it."""

    def __init__(self, site: str) -> None:
        self.site = site
        self._lock = threading.Lock()
        self._busy_until = 0.0  # when the work admitted so far is done, on time.monotonic()
        self._codes: dict[tuple[str, int], int] = {}  # (handler, code) → requests
        self._buckets = [0] * len(BUCKETS)
        self._count = 0
        self._sum = 0.0
        self._tokens = 0

    def admit(
        self, capacity: float, now: float | None = None, handler: str = SERVICE_PATH
    ) -> tuple[int, float]:
        """Admit one request at ``now``: (status, seconds it takes). 503 at once when the
        site serves nothing, or when the queue is longer than MAX_QUEUE_S."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if capacity <= 0:
                return self._record(503, 0.0, 0, handler)
            start = max(now, self._busy_until)
            wait = start - now
            if wait > MAX_QUEUE_S:
                return self._record(503, 0.0, 0, handler)
            self._busy_until = start + 1.0 / capacity
            return self._record(200, BASE_LATENCY_S + wait, TOKENS_PER_REQUEST, handler)

    def refuse(self, handler: str = SERVICE_PATH) -> None:
        """Count a request the site answered 503 without queueing it (it does not serve)."""
        with self._lock:
            self._record(503, 0.0, 0, handler)

    def _record(self, code: int, seconds: float, tokens: int, handler: str) -> tuple[int, float]:
        self._codes[handler, code] = self._codes.get((handler, code), 0) + 1
        for i, bound in enumerate(BUCKETS):
            if seconds <= bound:
                self._buckets[i] += 1
        self._count += 1
        self._sum += seconds
        self._tokens += tokens
        return code, seconds

    def exposition(self, ready: Mapping[str, int], capacity: float) -> str:
        """The site's metrics page."""
        s = f'site="{self.site}"'
        with self._lock:
            codes, buckets = dict(self._codes), list(self._buckets)
            count, total, tokens = self._count, self._sum, self._tokens
        lines = [f"# HELP {REQUESTS} Requests the site answered, by handler and status code.",
                 f"# TYPE {REQUESTS} counter"]  # fmt: skip
        # The service's series is there before its first request, so that an SLO on the
        # service reads 0 requests (and 0 errors) rather than nothing, which drills counts as
        # a failed read: a standby DR has answered health checks only.
        codes.setdefault((SERVICE_PATH, 200), 0)
        lines += [f'{REQUESTS}{{{s},handler="{h}",code="{c}"}} {n}'
                  for (h, c), n in sorted(codes.items())]  # fmt: skip
        lines += [f"# HELP {DURATION} Seconds a request took, queueing included.",
                  f"# TYPE {DURATION} histogram"]  # fmt: skip
        pairs = zip(BUCKETS, buckets, strict=True)
        lines += [f'{DURATION}_bucket{{{s},le="{b:g}"}} {n}' for b, n in pairs]
        lines += [f'{DURATION}_bucket{{{s},le="+Inf"}} {count}',
                  f"{DURATION}_sum{{{s}}} {total:.6f}", f"{DURATION}_count{{{s}}} {count}",
                  f"# HELP {TOKENS} Tokens the site generated.", f"# TYPE {TOKENS} counter",
                  f"{TOKENS}{{{s}}} {tokens}",
                  f"# HELP {READY} Ready replicas of each critical workload.",
                  f"# TYPE {READY} gauge"]  # fmt: skip
        lines += [f'{READY}{{{s},workload="{k}"}} {n}' for k, n in sorted(ready.items())]
        capacity_text = f"{capacity:g}" if math.isfinite(capacity) else "0"
        lines += [f"# HELP {CAPACITY} Requests a second the site's ready replicas serve.",
                  f"# TYPE {CAPACITY} gauge", f"{CAPACITY}{{{s}}} {capacity_text}"]  # fmt: skip
        return "\n".join(lines) + "\n"
