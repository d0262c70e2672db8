"""Readiness: the machinery that finds, runs, keeps and renders the checks, here; the checks
themselves (small functions that return a typed result) in ``areas``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drills.faces import lazy_face

if TYPE_CHECKING:
    from drills.checks.areas.cadence import MAX_DRILL_AGE_DAYS
    from drills.checks.areas.forecast_rto import FORECAST_CHECK, headline, plan_forecast
    from drills.checks.base import CheckRegistry, CheckResult, CheckSpec, Status, worst
    from drills.checks.catalog import load_checks
    from drills.checks.checkup import check_context, run_wayback, select_checks
    from drills.checks.fleet import PlanReadiness, run_readiness_all
    from drills.checks.readiness import run_readiness
    from drills.checks.runner import ReadinessReport
    from drills.checks.view import by_category, markdown, rows, verdict

__all__ = [
    "FORECAST_CHECK",
    "MAX_DRILL_AGE_DAYS",
    "CheckRegistry",
    "CheckResult",
    "CheckSpec",
    "PlanReadiness",
    "ReadinessReport",
    "Status",
    "by_category",
    "check_context",
    "headline",
    "load_checks",
    "markdown",
    "plan_forecast",
    "rows",
    "run_readiness",
    "run_readiness_all",
    "run_wayback",
    "select_checks",
    "verdict",
    "worst",
]

# Each name is imported from its module when first asked for, so that importing the
# package costs nothing until one is used.
__getattr__ = lazy_face(
    __name__,
    {
        "areas.cadence": ["MAX_DRILL_AGE_DAYS"],
        "areas.forecast_rto": ["FORECAST_CHECK", "headline", "plan_forecast"],
        "base": ["CheckRegistry", "CheckResult", "CheckSpec", "Status", "worst"],
        "catalog": ["load_checks"],
        "checkup": ["check_context", "run_wayback", "select_checks"],
        "fleet": ["PlanReadiness", "run_readiness_all"],
        "readiness": ["run_readiness"],
        "runner": ["ReadinessReport"],
        "view": ["by_category", "markdown", "rows", "verdict"],
    },
)
