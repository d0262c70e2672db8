"""Which plan files a front end reads: ``DRILLS_PLANS``, paths or globs.

The dashboard and `drills metrics serve` take the same setting, so they list the same plans.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "EXAMPLE_SUFFIXES",
    "LAB_DIR_ENV",
    "LAB_STATE_DIR",
    "default_plan_patterns",
    "plan_paths",
]

# Example plans ship next to real ones (plans/gpu-platform.example.yaml). A default glob
# leaves them out: an example is never drilled, so counting it would keep the
# never-drilled alert firing and coverage failing for ever. Named explicitly, they load.
EXAMPLE_SUFFIXES = (".example.yaml", ".example.yml")


# Where `drills lab up` keeps its state and writes its plan by default. Read here, not in
# the lab's package: the product finds the lab's plan without importing the lab.
LAB_DIR_ENV = "DRILLS_LAB_DIR"
LAB_STATE_DIR = Path(os.environ.get(LAB_DIR_ENV, ".lab"))


def default_plan_patterns(lab_plan: Path = LAB_STATE_DIR / "plan.yaml") -> list[str]:
    """The plans read when ``DRILLS_PLANS`` is unset: the lab's plan when the lab wrote
    one, then ``plans/*.yaml`` (without ``*.example.yaml``)."""
    return ([str(lab_plan)] if lab_plan.exists() else []) + ["plans/*.yaml"]


def plan_paths(spec: str | None, defaults: Sequence[str]) -> tuple[str, ...]:
    """Plan files named by ``spec`` (paths or globs separated by ``,`` or ``:``), in order,
    without duplicates; ``defaults`` (patterns too) when ``spec`` is empty, whose globs
    leave out example plans (``*.example.yaml``).

    Each is relative to the working directory when it lies under it (as a person
    would type it, and as `drills plan validate` would then name it), else absolute.
    """
    by_default = spec is None or not spec.strip()
    if spec is None or by_default:
        patterns = list(defaults)
    else:
        patterns = [p.strip() for p in re.split(rf"[,{re.escape(os.pathsep)}]", spec) if p.strip()]
    found: dict[Path, str] = {}
    cwd = Path.cwd()
    for pattern in patterns:
        expanded = os.path.expanduser(pattern)
        # A plain path that does not exist is still listed: the Plans page says so.
        matches = [expanded]
        if glob.has_magic(expanded):
            matches = sorted(glob.glob(expanded))
            if by_default:
                matches = [m for m in matches if not m.lower().endswith(EXAMPLE_SUFFIXES)]
        for match in matches:
            absolute = Path(match).resolve()
            shown = absolute.relative_to(cwd) if absolute.is_relative_to(cwd) else absolute
            found.setdefault(absolute, str(shown))
    return tuple(found.values())
