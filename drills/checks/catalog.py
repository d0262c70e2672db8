"""Import every module of ``drills.checks.areas`` so each check registers itself; no
hand-kept list of checks, and nothing to leave out: the machinery is not in that package."""

from __future__ import annotations

import importlib
import pkgutil

import drills.checks.areas as areas
from drills.checks.base import REGISTRY, CheckRegistry


def load_checks() -> CheckRegistry:
    # Sorted by module name, each importing what it builds on first: the registry's order,
    # and so the readiness table's within a category, is the same on every run.
    for module in pkgutil.iter_modules(areas.__path__):
        importlib.import_module(f"{areas.__name__}.{module.name}")
    return REGISTRY


CATEGORIES = ("Plan", "Images", "Data", "Secrets", "Cluster", "DNS", "Cadence", "Forecast")
