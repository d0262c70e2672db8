"""The processes `drills serve` starts, and how it stops them: each in a session of its
own, logging to a file of the state directory, stopped with every descendant it made."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from drills.errors import LabError
from drills.orchestrator.names import WARM_RUNNER_MODULE
from drills.processes import descendants, pid_alive

log = logging.getLogger("drills.orchestrator.serve")


def is_serve_process(pid: int) -> bool:
    """Whether pid still runs prefect, our warm runner or our receiver: after a reboot the
    recorded pid may be anyone's."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"prefect" in cmdline or WARM_RUNNER_ARGV in cmdline or RECEIVER_ARGV in cmdline


WARM_RUNNER_ARGV = WARM_RUNNER_MODULE.encode()  # `python -m drills.orchestrator.warm_runner`
RECEIVER_ARGV = b"serve\0receiver"  # `drills serve receiver` (receiver_process starts it)


def stop_tree(pid: int, timeout: float, *, check: bool = True) -> list[int]:
    """SIGTERM the process, its group and its descendants; SIGKILL what outlives timeout.

    Returns the pids still alive after that. A process is followed from the moment it is
    seen below pid: one whose parent died meanwhile is re-parented away from the tree, and
    one stuck in uninterruptible I/O (a database flush on a loaded disk) takes a while to
    die even of SIGKILL, so the wait after it is long."""
    if not pid_alive(pid) or (check and not is_serve_process(pid)):
        return []
    tree = {pid, *descendants(pid)}

    def alive() -> list[int]:
        tree.update(descendants(*[m for m in tree if pid_alive(m)]))  # started meanwhile
        return sorted(m for m in tree if pid_alive(m))

    def signal_all(sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)  # each of ours leads its own session
        for member in alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(member, sig)

    signal_all(signal.SIGTERM)
    if _wait_gone(alive, timeout):
        return []
    log.warning("pid %d did not stop within %.0fs; killing it", pid, timeout)
    signal_all(signal.SIGKILL)
    _wait_gone(alive, KILL_WAIT_S)
    return alive()


KILL_WAIT_S = 30.0


def _wait_gone(alive: Callable[[], list[int]], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while alive():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


# Every process `drills serve` starts carries its state directory in this variable, and so
# does everything they start: a flow-run process in a session of its own, or one orphaned
# when its parent died, is still found by it when stopping.
SERVE_MARK_ENV = "DRILLS_SERVE_MARK"


def spawn(argv: list[str], *, log_path: Path, env: dict[str, str], cwd: Path) -> int:
    with log_path.open("ab") as out:
        child = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=cwd, env=env, start_new_session=True,
        )  # fmt: skip
    return child.pid


def log_tail(path: Path, lines: int = 20) -> str:
    if not path.exists():
        return "(no log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def prefect_cli() -> str:
    """The prefect command of this interpreter's environment, so versions never mix."""
    beside = Path(sys.executable).with_name("prefect")
    found = str(beside) if beside.exists() else shutil.which("prefect")
    if found is None:
        raise LabError("the prefect command is not installed; run `make venv`")
    return found
