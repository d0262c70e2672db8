"""Processes the browser test runs: a Prefect runner serving the real drill flow (incident
and failback deployments), and
`drills ui` itself; each on loopback, each stopped by its own process group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from drills_lab.loopback import loopback_client
from drills_lab.procs import free_port
from tests.support.ui import FLOW_NAME, ROOT

# System Chromium as the browser tests launch it: no sandbox (containers), nothing fetched.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip

# From the entrypoint, as a worker runs a deployment of prefect.yaml: each run imports
# flows/drill.py afresh in `python -m prefect.engine`.
SERVE = """
import sys
from prefect import serve
from prefect.deployments.runner import RunnerDeployment
deployments = [
    RunnerDeployment.from_entrypoint("flows/drill.py:minimum_takeover_drill", name)
    for name in sys.argv[1:]
]
serve(*deployments, print_starting_message=False, limit=2)
"""


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
            "PREFECT_RUNNER_POLL_FREQUENCY": "1",
        }
    )
    env.update(extra)
    return env


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)


def _log_tail(path: Path) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-30:]) if path.exists() else ""


def _deployment_exists(api_url: str, name: str) -> bool:
    # A busy test server can take seconds to answer; a slow answer is "not yet", and the
    # caller's deadline decides.
    try:
        answer = loopback_client().get(f"{api_url}/deployments/name/{name}", timeout=10)
    except httpx.TimeoutException:
        return False
    return answer.status_code == 200


@contextlib.contextmanager
def serving_incident_flow(
    api_url: str, deployment: str, env: dict[str, str], log: Path, *, also: tuple[str, ...] = ()
) -> Iterator[str]:
    """A Prefect runner in a child: it registers the deployment of the real flow (and those
    named in ``also``) and runs every flow run of them. Yields the first deployment's full
    name once they all exist."""
    full_name = f"{FLOW_NAME}/{deployment}"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", SERVE, deployment, *also],
            cwd=ROOT, env=_env({"PREFECT_API_URL": api_url, **env}),
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        names = [full_name, *(f"{FLOW_NAME}/{name}" for name in also)]
        while not all(_deployment_exists(api_url, name) for name in names):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the flow runner did not start:\n{_log_tail(log)}")
            time.sleep(0.3)
        yield full_name
    finally:
        _stop(process)


@contextlib.contextmanager
def dashboard(
    env: dict[str, str], log: Path, cwd: Path, *, lab: bool = True, port: int | None = None
) -> Iterator[str]:
    """`drills ui [--lab]` on a loopback port (a free one unless given); yields its base URL
    once it is healthy."""
    port = port or free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "drills", "ui", *(["--lab"] if lab else []),
             "--host", "127.0.0.1", "--port", str(port)],
            cwd=cwd, env=_env(env), stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if loopback_client().get(f"{base}/_stcore/health", timeout=1).text == "ok":
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the dashboard did not start:\n{_log_tail(log)}")
            time.sleep(0.2)
        yield base
    finally:
        _stop(process)
