"""The door between the machinery and the checks: import every module of
``drills.checks.areas`` so each check registers itself (no hand-kept list of checks, and
nothing to leave out: the machinery is not in that package), and hand over the way back's."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

import drills.checks.areas as areas
from drills.checks.base import REGISTRY, CheckRegistry, CheckResult


def load_checks() -> CheckRegistry:
    # Sorted by module name, each importing what it builds on first: the registry's order,
    # and so the readiness table's within a category, is the same on every run.
    for module in pkgutil.iter_modules(areas.__path__):
        importlib.import_module(f"{areas.__name__}.{module.name}")
    return REGISTRY


@dataclass(frozen=True)
class WayBack:
    """The checks of the failback direction, as the machinery that runs them sees them."""

    swapped: tuple[str, ...]  # the plan's own checks that, asked of the reversed plan, fit
    own: CheckRegistry  # the way back's own checks, never run forward
    homeward: Callable[[CheckResult], CheckResult]  # a swapped check's result, reworded


def wayback_catalog() -> WayBack:
    from drills.checks.areas import wayback

    return WayBack(wayback.SWAPPED, wayback.WAYBACK, wayback.homeward_result)


CATEGORIES = ("Plan", "Images", "Data", "Secrets", "Cluster", "DNS", "Cadence", "Forecast")
