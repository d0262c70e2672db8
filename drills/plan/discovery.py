"""Which plan files a front end reads: ``DRILLS_PLANS``, paths or globs.

The dashboard and `drills metrics serve` take the same setting, so they list the same plans.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from pathlib import Path

__all__ = ["plan_paths"]


def plan_paths(spec: str | None, defaults: Sequence[str]) -> tuple[str, ...]:
    """Plan files named by ``spec`` (paths or globs separated by ``,`` or ``:``), in order,
    without duplicates; ``defaults`` (patterns too) when ``spec`` is empty.

    Each is relative to the working directory when it lies under it (as a person
    would type it, and as `drills plan validate` would then name it), else absolute.
    """
    if spec is None or not spec.strip():
        patterns = list(defaults)
    else:
        patterns = [p.strip() for p in re.split(rf"[,{re.escape(os.pathsep)}]", spec) if p.strip()]
    found: dict[Path, str] = {}
    cwd = Path.cwd()
    for pattern in patterns:
        expanded = os.path.expanduser(pattern)
        # A plain path that does not exist is still listed: the Plans page says so.
        matches = sorted(glob.glob(expanded)) if glob.has_magic(expanded) else [expanded]
        for match in matches:
            absolute = Path(match).resolve()
            shown = absolute.relative_to(cwd) if absolute.is_relative_to(cwd) else absolute
            found.setdefault(absolute, str(shown))
    return tuple(found.values())
