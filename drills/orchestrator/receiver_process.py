"""The Alertmanager webhook receiver beside the local Prefect server (drills.orchestrator
.receiver), started by `drills serve --receiver-token REF` and stopped with the rest by
`drills serve stop`. It runs as `drills serve receiver` in a session of its own, in the
project directory, with the history store and the plans the worker has."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import httpx

from drills.errors import LabError
from drills.orchestrator import process_tree, serve
from drills.orchestrator.receiver import DEFAULT_PORT, HEALTH_PATH, PATH
from drills.plan.refs import SecretRef
from drills.ports import free_port
from drills.processes import pid_alive


def receiver_running(info: serve.ServeInfo) -> bool:
    pid = info.receiver_pid
    return pid is not None and pid_alive(pid) and process_tree.RECEIVER_ARGV in _cmdline(pid)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _reference(token_ref: str) -> str:
    """The reference as the receiver, in the project directory, must read it: a relative
    ``file:`` path is made absolute here, where it was typed."""
    ref = SecretRef.parse(token_ref)  # ValueError names no value
    if ref.kind == "file" and not Path(ref.value).expanduser().is_absolute():
        return f"file:{Path(ref.value).resolve()}"
    return str(ref)


def _port(wanted: int | None) -> int:
    if wanted is not None:
        return wanted
    return DEFAULT_PORT if serve._port_free(DEFAULT_PORT) else free_port()


def start_receiver(
    info: serve.ServeInfo, token_ref: str, port: int | None, deadline: float
) -> serve.ServeInfo:
    """Start the receiver and wait until it answers; the info with its pid and URL."""
    chosen = _port(port)
    if not serve._port_free(chosen):
        raise LabError(f"port {chosen} on 127.0.0.1 is taken; pick another with --receiver-port")
    argv = [sys.executable, "-m", "drills", "serve", "receiver", "--port", str(chosen),
            "--token", _reference(token_ref)]  # fmt: skip
    log_path = info.logs["receiver"]
    pid = process_tree.spawn(argv, log_path=log_path, env=serve.worker_env(info),
                             cwd=Path(info.project_dir))  # fmt: skip
    base = f"http://127.0.0.1:{chosen}"
    info = dataclasses.replace(info, receiver_pid=pid, receiver_url=base + PATH)
    serve._write_info(info)
    serve._wait("alert receiver", lambda: _answers(base + HEALTH_PATH), pid, log_path, deadline)
    return info


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def ensure_receiver(
    info: serve.ServeInfo, token_ref: str | None, port: int | None, timeout: float = 60.0
) -> serve.ServeInfo:
    """The receiver asked for (``token_ref``), started unless it already runs."""
    if token_ref is None or receiver_running(info):
        return info
    return start_receiver(info, token_ref, port, time.monotonic() + timeout)


__all__ = ["ensure_receiver", "receiver_running", "start_receiver"]
