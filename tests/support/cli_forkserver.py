"""The server side of tests.support.cli: forks `python -m drills` (or the lab's daemon) with
its libraries loaded.

Started once per test worker (``python -m tests.support.cli_forkserver SOCKET``). It imports
the third-party libraries the CLI and the lab load (SQLAlchemy, alembic, pydantic, the
Kubernetes client, boto3, moto, rich, ...), then serves one request a connection: module,
arguments, environment and working directory in a JSON line, the child's stdin, stdout and
stderr as passed file descriptors. It forks, answers the child's pid, and later its wait
status.

Of drills, only the modules that read nothing of the environment or the working directory
when imported are loaded here (tests/test_cli_forkserver.py checks it): several others do,
or build their consoles, and each child must see its own. The server has one thread, so a
fork copies no lock that another thread holds. It exits when its stdin closes: with the
worker that started it, however that worker ends.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import gc
import importlib
import json
import os
import runpy
import selectors
import signal
import socket
import sys
import threading
import traceback
from typing import Any

from tests.support.gc_tuning import collect_less

# What `drills run`, `readiness`, `recover` and `history` import (about 1.7 CPU-s a process
# otherwise), and the lab's daemon (0.75). Prefect is not here: its settings are read on
# import. Nor is any module that imports a check (drills.checks.areas, which drills.takeover
# does): the checks register as they are imported, so the order of the readiness table would
# be the fork server's rather than the command's.
PRELOAD = (
    "sqlalchemy",
    "sqlalchemy.orm",
    "sqlalchemy.dialects.sqlite",
    "sqlalchemy.dialects.postgresql",
    "alembic.runtime.migration",
    "alembic.script",
    "alembic.config",
    "alembic.command",
    "pydantic",
    "yaml",
    "httpx",
    "kubernetes.client",
    "kubernetes.config",
    "boto3",
    "botocore.session",
    "cryptography.hazmat.primitives.asymmetric.ed25519",
    "cryptography.hazmat.primitives.serialization",
    "dns.message",
    "dns.query",
    "dns.update",
    "dns.tsigkeyring",
    "rich.console",
    "rich.table",
    "rich.markdown",
    "rich.text",
    "typer",
    "typer.main",
    "moto.moto_server.werkzeug_app",
    "werkzeug.serving",
    # Loaded on first use: httpx's transport, the inventory comparison, the report renderer.
    "httpcore",
    "h2.connection",
    "duckdb",
    "markdown",
    "cryptography.x509",
    "boto3.s3.transfer",
    # Their pydantic and SQLAlchemy classes, and what a drill and the checks build on: about
    # half a second more.
    "drills.plan",
    "drills.store.history",
    "drills.store.checkpoints",
    "drills.evidence.keys",
    "drills.evidence.checkpoints",
    "drills.evidence.findings",
    "drills.evidence.render",
    "drills.checks.runner",
    "drills.checks.readiness",
    "drills.targets.sites",
    "drills.targets.builtin_providers",
    "drills.targets.inventory_compare",
    "drills.targets.registry.oci",
    "drills.targets.dns.rfc2136",
    "drills.takeover.steps.executor",
)
MAX_FDS = 3


def preload() -> None:
    for name in PRELOAD:
        importlib.import_module(name)


def receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """One request: its JSON line and the three descriptors sent with it."""
    fds = array.array("i")
    data = b""
    while not data.endswith(b"\n"):
        chunk, ancdata, _, _ = conn.recvmsg(65536, socket.CMSG_SPACE(MAX_FDS * fds.itemsize))
        if not chunk:
            raise ConnectionError("the client went away")
        data += chunk
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                usable = len(payload) - len(payload) % fds.itemsize
                fds.frombytes(payload[:usable])
    return json.loads(data), list(fds)


def run_child(request: dict[str, Any], fds: list[int]) -> int:
    """In the forked child: become `python -m MODULE ARGS` and return its exit code."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if request["session"]:
        os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # As the interpreter opens them at start-up, on the descriptors just given.
    sys.stdin = open(0, encoding=None, closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", buffering=1 if os.isatty(1) else -1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, errors="backslashreplace", closefd=False)  # noqa: SIM115
    sys.path[0] = request["cwd"]
    sys.argv = ["-m", *request["args"]]
    code = 0
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc_code(exc)
    except BaseException:  # noqa: BLE001  # as the interpreter does: a traceback, exit 1
        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # as at interpreter exit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    return code


def exc_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def serve(path: str) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    waiting: dict[int, socket.socket] = {}  # child pid -> the connection awaiting its status
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_r, selectors.EVENT_READ, "child")
    selector.register(sys.stdin, selectors.EVENT_READ, "parent")
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if key.data == "parent":
                if not os.read(sys.stdin.fileno(), 4096):
                    return
            elif key.data == "child":
                os.read(wake_r, 4096)
                reap(waiting)
            else:
                conn, _ = listener.accept()
                start(conn, listener, waiting)
        reap(waiting)


def start(conn: socket.socket, listener: socket.socket, waiting: dict[int, socket.socket]) -> None:
    try:
        request, fds = receive(conn)
    except (ConnectionError, ValueError, OSError):
        conn.close()
        return
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            for held in (listener, conn, *waiting.values()):
                held.close()
            code = run_child(request, fds)
        except BaseException:  # noqa: BLE001  # the child's own set-up failed: say why, exit 70
            traceback.print_exc()
        finally:
            os._exit(code)
    for fd in fds:
        os.close(fd)
    with contextlib.suppress(OSError):
        conn.sendall(f"{pid}\n".encode())
    waiting[pid] = conn


def reap(waiting: dict[int, socket.socket]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = waiting.pop(pid, None)
        if conn is None:
            continue
        with contextlib.suppress(OSError):
            conn.sendall(f"{status}\n".encode())
        conn.close()


if __name__ == "__main__":
    collect_less()
    preload()
    gc.freeze()  # everything loaded so far: tests.support.gc_tuning says why
    serve(sys.argv[1])
