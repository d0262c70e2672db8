"""`python -m drills ARGS` in a process of its own, as an operator runs it, at a third of the cost;
and the lab's daemon likewise.

The suite runs the CLI some 250 times and starts some 70 labs, and each process spent most
of its CPU importing the same libraries (about 1.5 CPU-s of a `drills run`'s 2.8, 0.75 of a
lab daemon's start). So each test worker starts one fork server
(tests.support.cli_forkserver) with those libraries loaded, and every call forks it: the
child is still a process of its own, with its own arguments, environment, working
directory, descriptors and exit status, and it imports drills itself, as a fresh
interpreter does.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import json
import math
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

# A fork server that does not come up is a broken test environment, not a slow one.
_START_S = 60.0


class _ForkServer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._path = ""

    def path(self) -> str:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            return self._path

    def _start(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="drills-cli-")
        self._path = str(Path(self._dir.name) / "fork.sock")
        root = Path(__file__).resolve().parents[2]
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.cli_forkserver", self._path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=root,
        )  # fmt: skip
        assert self._proc.stdout is not None
        line = _Lines(self._proc.stdout.fileno(), "it was ready").next(_START_S)
        if line != "ready":
            raise RuntimeError(f"the CLI fork server did not start (it said {line!r})")

    def stop(self) -> None:
        with self._lock:
            if self._proc is not None and self._proc.stdin is not None:
                self._proc.stdin.close()
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
            if self._dir is not None:
                self._dir.cleanup()
            self._proc = None


class _Lines:
    """The lines the fork server writes on one descriptor, read as they come."""

    def __init__(self, fd: int, what: str) -> None:
        self._fd = fd
        self._what = what
        self._buffer = b""

    def next(self, timeout: float) -> str | None:
        """The next line, or None at ``timeout``; the server gone is an error, not a wait."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if timeout == math.inf else max(0.0, deadline - time.monotonic())
            if not select.select([self._fd], [], [], left)[0]:
                return None
            chunk = os.read(self._fd, 4096)
            if not chunk:
                raise RuntimeError(f"the CLI fork server went away before {self._what}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()


_SERVER = _ForkServer()
atexit.register(_SERVER.stop)


class ForkedProcess:
    """A process the fork server started: its pid, and its exit status when it ends (the
    server reports it on the connection this holds)."""

    def __init__(
        self,
        module: str,
        args: Sequence[str],
        fds: Sequence[int],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        session: bool = False,
    ) -> None:
        self.args = [sys.executable, "-m", module, *map(str, args)]
        request = {
            "module": module,
            "args": self.args[3:],
            "env": dict(os.environ if env is None else env),
            "cwd": os.path.abspath(cwd if cwd is not None else os.getcwd()),
            "session": session,
        }
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._conn.connect(_SERVER.path())
        line = (json.dumps(request) + "\n").encode()
        self._conn.sendmsg([line], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        self._lines = _Lines(self._conn.fileno(), f"it reported how {self.args} ended")
        pid = self._lines.next(_START_S)
        if pid is None:
            raise RuntimeError(f"the CLI fork server did not start {self.args}")
        self.pid = int(pid)
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code (negative: the signal that ended it), or None at ``timeout``."""
        if self.returncode is None:
            status = self._lines.next(math.inf if timeout is None else timeout)
            if status is not None:
                self.returncode = os.waitstatus_to_exitcode(int(status))
                self._conn.close()
        return self.returncode

    def poll(self) -> int | None:
        return self.wait(0)

    def __del__(self) -> None:
        self._conn.close()  # left running (a lab's daemon): nobody waits for its status

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


def spawn_lab_daemon(argv: list[str], log: IO[bytes], env: dict[str, str]) -> ForkedProcess:
    """drills_lab.control's ``spawn``: the daemon forked, its output to ``log``."""
    assert argv[1:3] == ["-m", "drills_lab.daemon"], argv
    with open(os.devnull, "rb") as devnull:
        fds = [devnull.fileno(), log.fileno(), log.fileno()]
        return ForkedProcess("drills_lab.daemon", argv[3:], fds, env=env, session=True)


def drills_process(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    input: str | None = None,  # as subprocess.run names it
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m drills ARGS`` run to its end, its output captured as text: what
    ``subprocess.run([sys.executable, "-m", "drills", *args], capture_output=True,
    text=True, ...)`` returns, and TimeoutExpired (the process killed) past ``timeout``."""
    with (
        tempfile.TemporaryFile() as stdin,
        tempfile.TemporaryFile() as stdout,
        tempfile.TemporaryFile() as stderr,
    ):
        if input is not None:
            stdin.write(input.encode())
            stdin.seek(0)
        fds = [stdin.fileno(), stdout.fileno(), stderr.fileno()]
        process = ForkedProcess("drills", args, fds, env=env, cwd=cwd)
        code = process.wait(timeout)
        if code is None:
            process.kill()
            process.wait()
            raise subprocess.TimeoutExpired(process.args, timeout or 0.0)
        stdout.seek(0)
        stderr.seek(0)
        out, err = stdout.read().decode(), stderr.read().decode()
    return subprocess.CompletedProcess(process.args, code, out, err)
