"""`python -m drills ARGS` in a process of its own, as an operator runs it, at a third of the cost.

The suite runs the CLI some 250 times, and each process spent most of its CPU importing the
same libraries (about 1.5 CPU-s of a `drills run`'s 2.8). So each test worker starts one
fork server (tests.support.cli_forkserver) with those libraries loaded, and every call forks
it: the child is still a process of its own, with its own arguments, environment, working
directory, descriptors and exit status, and it imports drills itself, as a fresh
interpreter does.
"""

from __future__ import annotations

import array
import atexit
import json
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
        line = _read_line(self._proc.stdout.fileno(), _START_S)
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


def _read_line(fd: int, timeout: float) -> str:
    data = b""
    deadline = time.monotonic() + timeout
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], None if left == float("inf") else max(0.0, left))
        if not ready:
            break
        chunk = os.read(fd, 1)
        if not chunk:
            break
        data += chunk
    return data.decode().strip()


_SERVER = _ForkServer()
atexit.register(_SERVER.stop)


def stop_server() -> None:
    """Stop this worker's fork server (the session's end does it)."""
    _SERVER.stop()


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
    argv = [str(a) for a in args]
    request = {
        "args": argv,
        "env": dict(os.environ if env is None else env),
        "cwd": os.path.abspath(cwd if cwd is not None else os.getcwd()),
    }
    with (
        tempfile.TemporaryFile() as stdin,
        tempfile.TemporaryFile() as stdout,
        tempfile.TemporaryFile() as stderr,
    ):
        if input is not None:
            stdin.write(input.encode())
            stdin.seek(0)
        status = _run(request, [stdin.fileno(), stdout.fileno(), stderr.fileno()], timeout, argv)
        stdout.seek(0)
        stderr.seek(0)
        out, err = stdout.read().decode(), stderr.read().decode()
    return subprocess.CompletedProcess(
        [sys.executable, "-m", "drills", *argv], os.waitstatus_to_exitcode(status), out, err
    )


def _run(request: dict[str, object], fds: list[int], timeout: float | None, argv: list[str]) -> int:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(_SERVER.path())
        line = (json.dumps(request) + "\n").encode()
        conn.sendmsg([line], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        pid = int(_read_line(conn.fileno(), _START_S))
        status = _read_line(conn.fileno(), float("inf") if timeout is None else timeout)
        if status:
            return int(status)
        os.kill(pid, signal.SIGKILL)
        _read_line(conn.fileno(), _START_S)
        raise subprocess.TimeoutExpired([sys.executable, "-m", "drills", *argv], timeout or 0.0)
