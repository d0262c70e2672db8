"""Garbage collection in the tests' own Python processes: rarer, and never over what a fork
inherits.

CPython collects its youngest generation every 700 new container objects, and the tests'
processes make millions: Streamlit's AppTest, pydantic models, the Kubernetes client's
objects. Raising that threshold took 7% of the CPU time of a test worker (334 UI, plan and
store tests in one process: 81.8 and 83.9 CPU-s against 88.2 and 90.0, two runs of each).
Memory is not short here: the youngest generation may hold 50,000 objects before a collection.

A forked child that collects walks everything it inherited, and writing the collector's
bookkeeping into each object copies every page of the parent's heap into the child. Frozen
objects are never walked: a fork server freezes what it loaded, and a process that forks now
and then freezes its heap around the fork.

The test processes do this (conftest), and so does the CLI fork server
(tests.support.cli_forkserver), whose children inherit it: the commands the tests run through
it and the lab's daemons. Collecting less often changes when cyclic garbage goes, never what a
program does. The processes that drills and Prefect start on their own (the dashboard, the
servers, the flow runs) keep CPython's defaults.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

YOUNG_THRESHOLD = 50_000


def collect_less() -> None:
    """Collect the youngest generation every YOUNG_THRESHOLD new objects, the older ones
    less often too."""
    gc.set_threshold(YOUNG_THRESHOLD, 50, 100)


@contextlib.contextmanager
def frozen_while_forking() -> Iterator[None]:
    """The heap frozen while the block forks: the child never collects what it inherits."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
