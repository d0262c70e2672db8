"""The DR pool's GPUs, node by node, by what holds them.

The functions live in :mod:`drills.checks.gpu_pool`, below the readiness checks that
also count them (`capacity.carry`); this module keeps the names `drills capacity` uses.
"""

from __future__ import annotations

from drills.checks.gpu_pool import (
    UNKNOWN_MODEL,
    PoolNode,
    critical_priority,
    pool_nodes,
    priority_classes,
)

__all__ = ["UNKNOWN_MODEL", "PoolNode", "critical_priority", "pool_nodes", "priority_classes"]
