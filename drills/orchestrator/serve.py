"""A local Prefect server and process worker for the drills deployments, in the background.

`drills serve` starts `prefect server start` on loopback, creates the `drills-process`
work pool, deploys prefect.yaml and starts a worker, each as its own session so that
`drills serve stop` can end it and every child it made. Everything Prefect writes
(PREFECT_HOME with its database, the logs, the pids) lives in the state directory, so
the user's own ~/.prefect is never touched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import logging
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from drills import apps
from drills.errors import LabError
from drills.orchestrator.names import (
    INCIDENT_DEPLOYMENT,
    WARM_HEAD_START_S,
    WARM_READY,
    WARM_RUNNER_MODULE,
)
from drills.orchestrator.plan_schedule import apply_plan_schedule
from drills.orchestrator.process_tree import (
    KILL_WAIT_S,
    SERVE_MARK_ENV,
    is_serve_process,
    log_tail,
    prefect_cli,
    spawn,
    stop_tree,
)
from drills.orchestrator.rest import PrefectRest, WorkerStatus
from drills.ports import free_port
from drills.processes import marked, pid_alive
from drills.store.history import database_url
from drills.store.url import url_backend, url_password, url_without_password, with_driver

log = logging.getLogger("drills.orchestrator.serve")

DEFAULT_STATE_DIR = Path(os.environ.get("DRILLS_SERVE_DIR", ".prefect-local"))
DEFAULT_PORT = 4200
WORK_POOL = "drills-process"
# How the worker starts each flow run: Prefect's engine, on the interpreter of drills.
ENGINE_COMMAND = (sys.executable, "-m", "prefect.engine")
WORKER_NAME = "drills-local-worker"
INFO_FILE = "serve.json"
# How often the worker asks for runs: Prefect's 10 s default is for fleets, not a laptop.
WORKER_QUERY_SECONDS = "2"
# Runs due WARM_HEAD_START_S ago, not Prefect's 10 s ahead: a declared incident is the
# warm runner's first. A run due in the future would not do: Prefect holds its start
# until it is due, and the warm runner's run would wait as long.
WORKER_PREFETCH_SECONDS = str(-WARM_HEAD_START_S)
# The incident deployment has a warm runner of its own (warm_runner.py): a standby process
# with everything imported, and a query every WARM_POLL_SECONDS.
WARM_POLL_SECONDS = "0.2"


@dataclass(frozen=True)
class ServeInfo:
    state_dir: str
    project_dir: str
    api_url: str
    ui_url: str
    db_url: str  # redacted: the runners get the real one in their environment
    server_pid: int
    worker_pid: int | None
    started_at: str
    startup_seconds: float = 0.0
    warm_pid: int | None = None  # the warm runner of the incident deployment
    prefect_db: str = ""  # redacted; empty: Prefect's SQLite in the state directory
    receiver_pid: int | None = None  # the Alertmanager webhook receiver (receiver_process)
    receiver_url: str = ""

    @property
    def logs(self) -> dict[str, Path]:
        state = Path(self.state_dir)
        names = ("server", "deploy", "worker", "warm", "receiver")
        return {name: state / f"{name}.log" for name in names}


def _write_info(info: ServeInfo) -> None:
    path = Path(info.state_dir) / INFO_FILE
    tmp = path.with_suffix(".tmp")
    tmp.touch(mode=0o600)
    tmp.write_text(json.dumps(dataclasses.asdict(info), indent=2))
    tmp.replace(path)


def redacted(url: str) -> str:
    """A database URL fit to print: any password replaced by ***."""
    return url_without_password(url)


def read_info(state_dir: Path) -> ServeInfo | None:
    path = state_dir / INFO_FILE
    if not path.exists():
        return None
    return ServeInfo(**json.loads(path.read_text()))


# -- settings ------------------------------------------------------------------------
def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        # As the server binds: a port left in TIME_WAIT by the last server is free to it.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def choose_port(wanted: int | None) -> int:
    if wanted is not None:
        if not _port_free(wanted):
            raise LabError(f"port {wanted} on 127.0.0.1 is taken; pick another with --port")
        return wanted
    if _port_free(DEFAULT_PORT):
        return DEFAULT_PORT
    return free_port()


def absolute_db_url(url: str | None = None) -> str:
    """The history store's URL with a relative SQLite path made absolute, so the worker's
    flow runs and the CLI open the same file whatever their working directory."""
    url = url or database_url()
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + ":memory:"):
        path = Path(url.removeprefix(prefix))
        if not path.is_absolute():
            return prefix + str(path.resolve())
    return url


def prefect_env(info: ServeInfo) -> dict[str, str]:
    """The environment of every prefect command we run: this server, this PREFECT_HOME."""
    env = dict(os.environ)
    env.update(
        PREFECT_HOME=str(Path(info.state_dir) / "home"),
        PREFECT_API_URL=info.api_url,
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_CLI_PROMPT="false",
    )
    env[SERVE_MARK_ENV] = str(Path(info.state_dir).resolve())
    for name in ("PREFECT_API_KEY", "PREFECT_API_AUTH_STRING", "PREFECT_PROFILE"):
        env.pop(name, None)  # meant for a server of your own, not this one
    # `prefect deploy` would bake its value into the pull step; the deployment must keep
    # the placeholder so that each worker supplies its own project directory.
    env.pop("DRILLS_PROJECT_DIR", None)
    return apps.on_pythonpath(env)


def prefect_database_url(url: str) -> str:
    """The Prefect server's database URL with the async driver it needs: a PostgreSQL URL
    as people write it (``postgresql://``, or ``postgresql+psycopg://`` as the history store
    takes it) gets ``+asyncpg``; SQLite gets ``+aiosqlite``."""
    backend = url_backend(url)
    if backend == "postgresql":
        return with_driver(url, "postgresql+asyncpg")
    if backend == "sqlite":
        return with_driver(url, "sqlite+aiosqlite")
    raise LabError(f"the Prefect server stores its data in PostgreSQL or SQLite, not {backend}")


def history_url(info: ServeInfo) -> str:
    """The history store's URL with its password, which serve.json does not keep: this
    process's, as long as it names the store the server was started with."""
    url = absolute_db_url()
    if redacted(url) == info.db_url:
        return url
    if url_password(info.db_url) is None:  # nothing was hidden: it is the URL
        return info.db_url
    raise LabError(
        f"the local server runs with history store {info.db_url}, but DRILLS_DB_URL"
        f" here names {redacted(url)}; set it alike, or `drills serve stop` first"
    )


def worker_env(info: ServeInfo) -> dict[str, str]:
    """The worker's, which its flow runs inherit: where the project is, which history store."""
    env = prefect_env(info)
    env.update(DRILLS_PROJECT_DIR=info.project_dir, DRILLS_DB_URL=history_url(info))
    env.setdefault("PREFECT_WORKER_QUERY_SECONDS", WORKER_QUERY_SECONDS)
    env.setdefault("PREFECT_WORKER_PREFETCH_SECONDS", WORKER_PREFETCH_SECONDS)
    return env


# -- lifecycle -----------------------------------------------------------------------
def running(state_dir: Path = DEFAULT_STATE_DIR) -> ServeInfo | None:
    info = read_info(state_dir.resolve())
    if info is None or not pid_alive(info.server_pid) or not is_serve_process(info.server_pid):
        return None
    return info


def _wait(what: str, ready: Callable[[], bool], pid: int, log_path: Path, deadline: float) -> None:
    while time.monotonic() < deadline:
        if ready():
            return
        if not pid_alive(pid):
            raise LabError(f"the {what} exited while starting:\n{log_tail(log_path)}")
        time.sleep(0.25)
    raise LabError(f"the {what} did not become ready in time:\n{log_tail(log_path)}")


def _run_cli(args: list[str], info: ServeInfo, log_path: Path, timeout: float) -> None:
    with log_path.open("ab") as out:
        try:
            done = subprocess.run(
                [prefect_cli(), *args], stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, cwd=info.project_dir, env=prefect_env(info),
                timeout=max(timeout, 1.0), check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise LabError(f"`prefect {' '.join(args)}` timed out") from None
    if done.returncode != 0:
        raise LabError(f"`prefect {' '.join(args)}` failed:\n{log_tail(log_path)}")


def _online(api: PrefectRest, name: str, since: dt.datetime) -> bool:
    """The worker has sent a heartbeat since it started (its record outlives a restart)."""
    workers: list[WorkerStatus] = api.workers(WORK_POOL)
    return any(
        w.name == name
        and w.status == "ONLINE"
        and w.last_heartbeat is not None
        and dt.datetime.fromisoformat(w.last_heartbeat) >= since
        for w in workers
    )


def start_worker(info: ServeInfo, name: str, log_path: Path, deadline: float) -> int:
    """A process worker of the drills pool, named ``name``, waited on until online; its pid.

    `drills serve` starts one; another (as on a second host) takes the same pool's runs
    when the first is gone."""
    argv = [prefect_cli(), "worker", "start", "--pool", WORK_POOL, "--type", "process"]
    argv += ["--name", name]
    since = dt.datetime.now(dt.UTC)
    pid = spawn(argv, log_path=log_path, env=worker_env(info), cwd=Path(info.project_dir))
    with PrefectRest(info.api_url) as api:
        _wait("worker", lambda: _online(api, name, since), pid, log_path, deadline)
    return pid


def _start_worker(info: ServeInfo, deadline: float) -> ServeInfo:
    pid = start_worker(info, WORKER_NAME, info.logs["worker"], deadline)
    info = dataclasses.replace(info, worker_pid=pid)
    _write_info(info)
    return info


def _warm_ready(info: ServeInfo) -> bool:
    """Whether the warm runner's standby is ready: until then a declared incident would be
    taken by the worker's slower cold start."""
    try:
        return WARM_READY in info.logs["warm"].read_text(errors="replace")
    except OSError:
        return False


def _start_warm(info: ServeInfo, deadline: float) -> ServeInfo:
    """The warm runner of the incident deployment, beside the worker (warm_runner.py),
    waited on until its standby is ready."""
    argv = [sys.executable, "-m", WARM_RUNNER_MODULE, "--deployment", INCIDENT_DEPLOYMENT]
    argv += ["--poll", WARM_POLL_SECONDS]
    env = worker_env(info)
    env.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "drills")  # as prefect.yaml gives the worker
    # A ready line from an earlier runner proves nothing; its log may tell why it stopped.
    with contextlib.suppress(FileNotFoundError):
        info.logs["warm"].replace(info.logs["warm"].with_suffix(".log.1"))
    pid = spawn(argv, log_path=info.logs["warm"], env=env, cwd=Path(info.project_dir))
    info = dataclasses.replace(info, warm_pid=pid)
    _write_info(info)
    _wait("warm runner", lambda: _warm_ready(info), pid, info.logs["warm"], deadline)
    return info


def warm_running(info: ServeInfo) -> bool:
    return (
        info.warm_pid is not None and pid_alive(info.warm_pid) and is_serve_process(info.warm_pid)
    )


def up(
    state_dir: Path = DEFAULT_STATE_DIR,
    *,
    project_dir: Path = Path("."),
    port: int | None = None,
    timeout: float = 300.0,
    database: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[ServeInfo, bool]:
    """Start server, pool, deployments and worker; returns the info and whether all of it
    was already running. A server left without its worker gets a new worker."""
    state_dir, project_dir = state_dir.resolve(), project_dir.resolve()
    prefect_file = apps.prefect_file(project_dir)
    started = time.monotonic()
    deadline = started + timeout

    def done(what: str) -> None:
        if progress is not None:
            progress(f"{what} after {time.monotonic() - started:.1f}s")

    existing = running(state_dir)
    if existing is not None:
        return _complete(existing, deadline)
    down(state_dir)  # whatever a crashed start left behind
    (state_dir / "home").mkdir(parents=True, exist_ok=True)
    chosen = choose_port(port)
    info = ServeInfo(
        state_dir=str(state_dir),
        project_dir=str(project_dir),
        api_url=f"http://127.0.0.1:{chosen}/api",
        ui_url=f"http://127.0.0.1:{chosen}",
        db_url=redacted(absolute_db_url()),
        server_pid=0,
        worker_pid=None,
        started_at=dt.datetime.now(dt.UTC).isoformat(),
        prefect_db=redacted(database) if database else "",
    )
    argv = [prefect_cli(), "server", "start", "--host", "127.0.0.1", "--port", str(chosen)]
    server_env = prefect_env(info)
    if database:  # the server alone opens it; migrated by Prefect on start
        server_env["PREFECT_API_DATABASE_CONNECTION_URL"] = prefect_database_url(database)
    pid = spawn(argv, log_path=info.logs["server"], env=server_env, cwd=state_dir)
    info = dataclasses.replace(info, server_pid=pid)
    _write_info(info)
    try:
        with PrefectRest(info.api_url) as api:
            _wait("Prefect server", api.healthy, pid, info.logs["server"], deadline)
            done(f"server answers on {info.api_url}")
            if not api.work_pool_exists(WORK_POOL):
                remaining = deadline - time.monotonic()
                _run_cli(["work-pool", "create", WORK_POOL, "--type", "process"], info,
                         info.logs["deploy"], remaining)  # fmt: skip
                # Left to choose, the process worker starts a workspace supervisor that
                # imports Prefect, runs the pull steps, then replaces itself with this same
                # engine, which imports Prefect again: two CPU-seconds and a second more per
                # flow run. The engine runs the pull steps itself.
                api.set_work_pool_command(WORK_POOL, shlex.join(ENGINE_COMMAND))
        deploy = ["--no-prompt", "deploy", "--all", "--prefect-file", str(prefect_file)]
        _run_cli(deploy, info, info.logs["deploy"], deadline - time.monotonic())
        with PrefectRest(info.api_url) as api:
            scheduled = apply_plan_schedule(api, project_dir)
        done(f"work pool {WORK_POOL} and the deployments of prefect.yaml ready; {scheduled}")
        info = _start_worker(info, deadline)
        done(f"worker {WORKER_NAME} online")
        info = _start_warm(info, deadline)
        done(f"warm runner of {INCIDENT_DEPLOYMENT} ready")
    except BaseException:
        down(state_dir)
        raise
    info = dataclasses.replace(info, startup_seconds=round(time.monotonic() - started, 2))
    _write_info(info)
    return info, False


def _complete(existing: ServeInfo, deadline: float) -> tuple[ServeInfo, bool]:
    """A server already running: start whatever of ours it is missing."""
    info, already = existing, True
    worker = existing.worker_pid
    if worker is None or not pid_alive(worker) or not is_serve_process(worker):
        log.info("the server runs without its worker; starting one")
        info, already = _start_worker(info, deadline), False
    if not warm_running(info):
        log.info("the server runs without its warm runner; starting one")
        info, already = _start_warm(info, deadline), False
    return info, already


def down(state_dir: Path = DEFAULT_STATE_DIR, timeout: float = 15.0) -> bool:
    """Stop the worker (and its flow runs), then the server; returns whether any ran.

    Raises LabError naming what survived SIGKILL; the pid file is kept then, so that a
    second stop finds them."""
    state_dir = state_dir.resolve()
    info = read_info(state_dir)
    if info is None:
        return False
    pids = [pid for pid in (info.server_pid, info.worker_pid, info.warm_pid) if pid]
    was_running = any(pid_alive(pid) for pid in pids)
    # The runners first: without their server they retry for a long while before they exit.
    survivors = [
        left
        for pid in (info.receiver_pid, info.warm_pid, info.worker_pid, info.server_pid)
        if pid
        for left in stop_tree(pid, timeout)
    ]
    strays = marked(SERVE_MARK_ENV, str(state_dir))  # left the trees before the stop
    survivors += [left for pid in strays for left in stop_tree(pid, timeout, check=False)]
    if survivors:
        raise LabError(
            f"processes {', '.join(map(str, survivors))} outlived SIGKILL for "
            f"{KILL_WAIT_S:.0f} s (stuck in I/O?); run drills serve stop again"
        )
    (state_dir / INFO_FILE).unlink(missing_ok=True)
    return was_running
