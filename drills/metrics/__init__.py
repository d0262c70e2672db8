"""`drills metrics serve`: readiness, cadence, RTO/RPO and runs, as Prometheus metrics.

snapshot.py computes the figures from the history store and the plans (no Prometheus);
plans.py keeps the parsed plans by file; exporter.py turns a snapshot into metrics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drills.faces import lazy_face

if TYPE_CHECKING:
    from drills.metrics.exporter import DrillsCollector, start
    from drills.metrics.plans import PlanCache
    from drills.metrics.snapshot import Snapshotter

__all__ = ["DrillsCollector", "PlanCache", "Snapshotter", "start"]

# Each name is imported from its module when first asked for, so that importing the
# package costs nothing until one is used.
__getattr__ = lazy_face(
    __name__,
    {
        "exporter": ["DrillsCollector", "start"],
        "plans": ["PlanCache"],
        "snapshot": ["Snapshotter"],
    },
)
