"""What the DR pool costs and whether it is the right size: prices, the pool's GPUs by use,
the idle ratio (DCGM in Prometheus, else allocation) and a sizing recommendation.

Nothing here mutates anything: `drills capacity` and the metrics read the DR cluster, a
pricing file and Prometheus, and compute.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drills.faces import lazy_face

if TYPE_CHECKING:
    from drills.capacity.figures import DrFigures, FiguresCache, compute
    from drills.capacity.gather import gather_capacity, pricing_for
    from drills.capacity.idle import busy_over_time
    from drills.capacity.pricing import PricingError
    from drills.capacity.report import CapacityReport, build_report

__all__ = [
    "CapacityReport",
    "DrFigures",
    "FiguresCache",
    "PricingError",
    "build_report",
    "busy_over_time",
    "compute",
    "gather_capacity",
    "pricing_for",
]

# Each name is imported from its module when first asked for, so that importing the
# package costs nothing until one is used.
__getattr__ = lazy_face(
    __name__,
    {
        "figures": ["DrFigures", "FiguresCache", "compute"],
        "gather": ["gather_capacity", "pricing_for"],
        "idle": ["busy_over_time"],
        "pricing": ["PricingError"],
        "report": ["CapacityReport", "build_report"],
    },
)
