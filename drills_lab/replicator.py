"""The lab's reverse replication: while DR serves, what DR writes is copied to the primary.

moto keeps replication rules but never acts on them. Bidirectional rules would copy
each object written at DR back to the primary bucket; this thread does the same for
every dataset of the lab, a moment after the write, while any DR workload runs (DR
serves). It needs moto running in this process (the lab daemon's case).
`drills lab up --no-reverse-replication` leaves it off, so the failback's data gate has
something to find.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from drills_lab import topology
from drills_lab.endpoint import ObjectReader
from drills_lab.seed_aws import ACCOUNT

log = logging.getLogger("drills_lab.replicator")

INTERVAL_S = 0.5


def _objects(bucket: str, prefix: str) -> dict[str, str]:
    """Key → ETag of every current object under ``prefix``, as ListObjectsV2 answers it.

    Read from moto's backend in this process, as a storage service's replication reads its
    own index: listing both sides of every dataset over HTTP twice a second was most of a
    serving lab's CPU (7 CPU-s a minute against 0.7 idle). The copies go through the API.
    """
    from moto.s3.models import FakeDeleteMarker, s3_backends

    keys = s3_backends[ACCOUNT]["aws"].get_bucket(bucket).keys
    return {
        name: key.etag
        for name, key in keys.items()  # a copy of the index: writes may go on meanwhile
        if name.startswith(prefix) and not isinstance(key, FakeDeleteMarker)
    }


class ReverseReplicator:
    def __init__(self, dr_cluster: ObjectReader, s3: Any, *, interval_s: float = INTERVAL_S):
        self.dr_cluster = dr_cluster
        self.s3 = s3  # one client: the lab's buckets of both sites live in one moto
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lab-reverse-repl", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _dr_serves(self) -> bool:
        for w in topology.WORKLOADS:
            obj = self.dr_cluster.get(f"{w.kind.lower()}s", w.namespace, w.name) or {}
            if int(obj.get("spec", {}).get("replicas") or 0) > 0:
                return True
        return False

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                if self._dr_serves():
                    self.copy_back()
            except Exception:  # a moto hiccup: the next round tries again
                log.warning("reverse replication round failed", exc_info=True)

    def copy_back(self) -> list[str]:
        """Copy every DR object the primary lacks (or holds differently); returns the keys."""
        copied = []
        for ds in topology.DATASETS:
            at_dr = _objects(ds.dr_bucket, ds.prefix)
            at_primary = _objects(ds.primary_bucket, ds.prefix)
            for key, etag in at_dr.items():
                if at_primary.get(key) == etag:
                    continue
                body = self.s3.get_object(Bucket=ds.dr_bucket, Key=key)["Body"].read()
                self.s3.put_object(Bucket=ds.primary_bucket, Key=key, Body=body)
                copied.append(f"{ds.primary_bucket}/{key}")
        if copied:
            log.info("copied %d object(s) from DR back to the primary", len(copied))
        return copied
