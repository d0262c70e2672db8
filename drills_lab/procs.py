"""Child processes for the lab that never outlive it.

The lab runs real daemons (BIND ``named``, the CNCF registry) as children. A drill that
crashes, or a test run killed with SIGKILL, must not leave them listening: the next run
would then find its ports taken or, worse, talk to a stale server. Each child therefore
asks the kernel for SIGTERM when its parent goes away (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

from drills.errors import LabError
from drills.ports import free_port as free_port  # the lab's servers take theirs here

log = logging.getLogger("drills_lab.procs")

_SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin")
_PR_SET_PDEATHSIG = 1
_LOG_TAIL_BYTES = 2000

# The kernel sends PDEATHSIG when the *thread* that forked the child exits, not the
# process. A child started from a short-lived worker thread (a Prefect task, a thread
# pool) would be killed as soon as that thread finished. All forks therefore happen on
# one thread that lives as long as the interpreter.
_spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="drills-spawner")


def find_binary(name: str) -> str | None:
    """Locate an executable on PATH or in the sbin directories a non-root PATH lacks."""
    found = shutil.which(name)
    if found is not None:
        return found
    return shutil.which(name, path=os.pathsep.join(_SBIN_DIRS))


def require_binary(name: str, package: str) -> str:
    """Locate an executable or raise a LabError that says which package provides it."""
    found = find_binary(name)
    if found is None:
        raise LabError(f"{name} not installed; apt-get install {package}")
    return found


def _die_with_parent_hook(parent_pid: int) -> Callable[[], None]:
    libc = ctypes.CDLL(None, use_errno=True)

    def hook() -> None:
        # Runs in the forked child before exec; the signal setting survives exec.
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        # The parent may have died between fork and prctl: then no signal will come.
        if os.getppid() != parent_pid:
            os._exit(1)

    return hook


def _read_tail(path: Path, limit: int = _LOG_TAIL_BYTES) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read().decode("utf-8", errors="replace").strip()
    except OSError as exc:
        return f"(log {path} unreadable: {exc.strerror})"


class ManagedProcess:
    """A child process, in its own process group, that dies with its parent.

    ``stop`` terminates the whole group, so helpers a daemon forks go too.
    """

    def __init__(
        self,
        name: str,
        argv: list[str],
        *,
        log_path: Path,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = env
        self.cwd = cwd
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The child's pid while it is started, else None."""
        return None if self._proc is None else self._proc.pid

    def running(self) -> bool:
        """True while the child has been started and has not exited."""
        return self._proc is not None and self._proc.poll() is None

    def start(self, ready: Callable[[], bool], timeout: float = 10.0) -> None:
        """Start the child and wait until ``ready()`` returns True.

        ``ready`` must return False, not raise, while the service is still coming up.
        On timeout, or if the child exits first, the child is stopped and LabError
        carries the tail of its log.
        """
        if self.running():
            raise LabError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        started = time.monotonic()
        try:
            self._proc = _spawner.submit(self._spawn, self._log, os.getpid()).result()
        except LabError:
            self._close_log()
            raise
        log.debug("%s started as pid %d: %s", self.name, self._proc.pid, " ".join(self.argv))

        deadline = started + timeout
        delay = 0.005
        while True:
            code = self._proc.poll()
            if code is not None:
                self.stop()
                raise LabError(
                    f"{self.name} exited with code {code} while starting; "
                    f"log {self.log_path}:\n{_read_tail(self.log_path)}"
                )
            try:
                is_ready = ready()
            except BaseException:
                self.stop()
                raise
            if is_ready:
                log.info(
                    "%s ready in %.0f ms (pid %d)",
                    self.name,
                    (time.monotonic() - started) * 1000,
                    self._proc.pid,
                )
                return
            if time.monotonic() >= deadline:
                self.stop()
                raise LabError(
                    f"{self.name} not ready after {timeout:.1f} s; "
                    f"log {self.log_path}:\n{_read_tail(self.log_path)}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def _spawn(self, log_file: IO[bytes], parent_pid: int) -> subprocess.Popen[bytes]:
        try:
            return subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                process_group=0,
                preexec_fn=_die_with_parent_hook(parent_pid),
            )
        except OSError as exc:
            raise LabError(f"cannot start {self.name} ({self.argv[0]}): {exc.strerror}") from exc

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM the child's group, then SIGKILL it after ``timeout``. Idempotent."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            self._signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s ignored SIGTERM for %.1f s; killing it", self.name, timeout)
                self._signal_group(proc, signal.SIGKILL)
                proc.wait()
            log.debug("%s (pid %d) stopped with code %s", self.name, proc.pid, proc.returncode)
        else:
            # The leader is gone, but children it forked may still hold the group.
            self._signal_group(proc, signal.SIGKILL)
        self._proc = None
        self._close_log()

    @staticmethod
    def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def __repr__(self) -> str:
        return f"ManagedProcess({self.name!r}, pid={self.pid})"
