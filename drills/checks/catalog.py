"""Import every check module so each registers itself; no hand-kept list of checks."""

from __future__ import annotations

import importlib
import pkgutil

import drills.checks
from drills.checks.base import REGISTRY, CheckRegistry

# Modules of the package that hold machinery, not checks.
_MACHINERY = frozenset({"base", "runner", "catalog", "readiness", "view"})


def load_checks() -> CheckRegistry:
    for module in pkgutil.iter_modules(drills.checks.__path__):
        if module.name not in _MACHINERY:
            importlib.import_module(f"drills.checks.{module.name}")
    return REGISTRY


CATEGORIES = ("Plan", "Images", "Data", "Secrets", "Cluster", "DNS", "Cadence", "Forecast")
