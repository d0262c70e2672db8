"""The session labs that a few files share, each stopped once its last file is done.

A lab costs about 3 CPU-s to start (its daemon about 2, its own Prometheus, registries
and BIND the rest), then 1 to 2 CPU-s a minute while idle: its two controllers, its metrics
scraped every second, its users' demand, its External Secrets and replication loops. Kept
to the end of the session on every worker that once needed one, the parallel phase held up
to sixteen labs at a time, most of them idle, and each worker started its own copy of each.
So the files that name one of these labs run on one worker, one after another
(``tests.support.ordering``), and the lab stops after the last.

A file belongs to a group when its source names the lab's fixture: the scheduler decides
from the file alone, before any test is collected in its process.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any

from drills_lab.runtime import LabInfo

# Starts a lab: its name, and the options of `drills_lab.control.up`.
StartLab = Callable[..., AbstractContextManager[LabInfo]]

# The grouped labs' fixture names; a file that names two belongs to the first one's group.
GROUPED_LABS = ("stalled_lab", "drift_lab", "capacity_lab", "scheduling_drift_lab")
_NAMED = re.compile(r"\b(" + "|".join(GROUPED_LABS) + r")\b")


@functools.cache
def labs_named_in(path: Path) -> tuple[str, ...]:
    """The grouped labs the test file at ``path`` names, in GROUPED_LABS order."""
    try:
        named = set(_NAMED.findall(path.read_text(encoding="utf-8")))
    except OSError:
        return ()
    return tuple(name for name in GROUPED_LABS if name in named)


class LabGroups:
    """The grouped labs running in this process, started on first use."""

    def __init__(self, start: StartLab) -> None:
        self._start = start
        self._running: dict[str, tuple[LabInfo, ExitStack]] = {}

    def get(
        self, name: str, prepare: Callable[[LabInfo], None] | None = None, **options: Any
    ) -> LabInfo:
        """The lab ``name``, started with ``options`` (and then ``prepare``) unless it runs."""
        if name not in self._running:
            with ExitStack() as stack:
                info = stack.enter_context(self._start(name.replace("_", "-"), **options))
                if prepare is not None:
                    prepare(info)
                self._running[name] = (info, stack.pop_all())
        return self._running[name][0]

    def stop_all_but(self, needed: Collection[str]) -> None:
        """Stop the running labs not in ``needed``."""
        for name in [n for n in self._running if n not in needed]:
            _, stack = self._running.pop(name)
            stack.close()
