"""The DR sentinel's heartbeat: while its pod is Ready, it records a success every minute.

A real sentinel would run a small inference or a checkpoint read-back and write the time
of its last success; the lab's stands in for it, so `cluster.sentinel` sees a recent
success for as long as the lab runs, and a stale one when the sentinel is scaled down.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import Any

from drills_lab import topology
from drills_lab.kubeapi.store import ResourceStore
from drills_lab.seed_scheduling import SUCCESS_ANNOTATION

log = logging.getLogger("drills_lab.sentinel")


class SentinelHeartbeat:
    def __init__(self, store: ResourceStore, *, interval_s: float) -> None:
        self.store = store
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lab-sentinel", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.beat()
            except Exception:  # keep beating; the log has why this one failed
                log.exception("sentinel heartbeat failed")

    def beat(self) -> bool:
        """Record a success now, if the sentinel has a Ready replica."""
        ns, name = topology.SENTINEL_NAMESPACE, topology.SENTINEL_NAME
        obj = self.store.get("deployments", ns, name) or {}
        if int((obj.get("status") or {}).get("readyReplicas") or 0) < 1:
            return False
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")

        def stamp(o: dict[str, Any]) -> dict[str, Any]:
            o.setdefault("metadata", {}).setdefault("annotations", {})[SUCCESS_ANNOTATION] = now
            return o

        self.store.patch("deployments", ns, name, stamp)
        return True
