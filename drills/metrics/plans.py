"""The plans a scrape reports on, each parsed again only when its file changed."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from drills.errors import PlanError
from drills.plan import DrillPlan, load_plan


@dataclass(frozen=True)
class LoadedPlans:
    plans: tuple[DrillPlan, ...]
    invalid: tuple[str, ...]  # the files that do not load, as configured


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size


class PlanCache:
    """``load()`` lists the files again (globs may match new ones) and parses only those
    whose modification time or size changed since the last call."""

    def __init__(self, paths: Callable[[], Sequence[str]]) -> None:
        self._paths = paths
        self._parsed: dict[str, tuple[tuple[int, int] | None, DrillPlan | None]] = {}
        self._lock = threading.Lock()

    def load(self) -> LoadedPlans:
        plans: dict[str, DrillPlan] = {}
        invalid: list[str] = []
        with self._lock:
            paths = list(self._paths())
            for path in paths:
                plan = self._plan(path)
                if plan is None:
                    invalid.append(path)
                else:
                    plans.setdefault(plan.name, plan)  # two files of one plan: the first wins
            for gone in self._parsed.keys() - set(paths):
                del self._parsed[gone]
        return LoadedPlans(tuple(plans.values()), tuple(invalid))

    def _plan(self, path: str) -> DrillPlan | None:
        stamp = _stamp(path)
        cached = self._parsed.get(path)
        if cached is not None and stamp is not None and cached[0] == stamp:
            return cached[1]
        try:
            plan: DrillPlan | None = load_plan(path)
        except PlanError:
            plan = None
        self._parsed[path] = (stamp, plan)
        return plan
