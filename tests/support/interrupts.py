"""Ctrl-C during a parallel run: each worker stops its test, then cleans up in peace.

The terminal's SIGINT reaches every worker, and xdist's controller then asks them to end.
execnet gives a worker 5 s, sends it a SIGINT of its own, and ends it 10 s later with
``os._exit``. A second KeyboardInterrupt half-way through the clean-up would leave the
servers not yet stopped (`drills serve`, a Prefect runner) running with nobody to stop
them. So a worker takes its first SIGINT as Ctrl-C and lets the later ones pass: its
clean-up has the 15 s. What the worker's end still cuts short goes with its fork server
(tests.support.cli_forkserver).
"""

from __future__ import annotations

import signal
from types import FrameType

# How long xdist's controller waits for the workers to end before it kills them (its default
# is 10 s): longer than execnet's 15 s, so that a worker always ends its own way.
WORKER_EXIT_S = 30


def interrupt_once() -> None:
    """In a worker: the first SIGINT raises KeyboardInterrupt, the later ones do nothing."""

    def first(signum: int, frame: FrameType | None) -> None:
        # A handler, not SIG_IGN: the processes the clean-up starts must get the default.
        signal.signal(signal.SIGINT, lambda *_: None)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, first)
