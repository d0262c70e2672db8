"""The lab's trainer: it keeps writing checkpoints while the primary's trainer runs.

Without it the lab's newest checkpoint would only age, and a lab left up for a
while would fail its own checkpoint-freshness check. It also makes fencing
observable: scale the primary trainer to 0 and the checkpoints stop.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading

from drills_lab import topology
from drills_lab.endpoint import ObjectReader
from drills_lab.seed_aws import body_of, dataset_keys, write_versions

log = logging.getLogger("drills_lab.trainer")

TRAINER = next(w for w in topology.WORKLOADS if w.name == "trainer")
CHECKPOINTS = next(d for d in topology.DATASETS if d.kind == "checkpoint")


class CheckpointWriter:
    def __init__(self, primary: ObjectReader, *, interval_s: float, replicate: bool) -> None:
        self.primary = primary
        self.interval_s = interval_s
        self.replicate = replicate  # --drift: replication to DR has stopped
        self.step = len(dataset_keys(CHECKPOINTS)) * 100
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lab-trainer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _training(self) -> bool:
        obj = self.primary.get("deployments", TRAINER.namespace, TRAINER.name) or {}
        return int(obj.get("spec", {}).get("replicas") or 0) > 0

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if self._training():
                self.write_one()

    def write_one(self) -> str:
        self.step += 100
        key = f"{CHECKPOINTS.prefix}step-{self.step:06d}/model.safetensors"
        now = dt.datetime.now(dt.UTC)
        body = body_of(CHECKPOINTS, key)
        # DR first: a comparison racing this write must never see a primary object missing.
        if self.replicate:
            write_versions(CHECKPOINTS.dr_bucket, key, body, now)
        write_versions(CHECKPOINTS.primary_bucket, key, body, now)
        log.info("checkpoint %s written%s", key, "" if self.replicate else " (not replicated)")
        return key
