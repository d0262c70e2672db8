"""Start, stop and inspect the lab daemon from the CLI."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from drills.errors import LabError
from drills.plan.discovery import LAB_STATE_DIR
from drills.processes import pid_alive
from drills_lab.state import ERROR_FILE, LabInfo, read_info

__all__ = ["LabInfo", "down", "missing_modules", "probe", "running", "up"]

DEFAULT_STATE_DIR = LAB_STATE_DIR
# What the `lab` extra adds: moto serves the lab's AWS APIs through its Flask app.
LAB_MODULES = ("moto", "flask", "flask_cors")


def missing_modules() -> list[str]:
    """The lab's modules this environment lacks (the daemon would die importing them)."""
    return [name for name in LAB_MODULES if importlib.util.find_spec(name) is None]


class Daemon(Protocol):
    """The started daemon process, as much of subprocess.Popen as `up` uses."""

    pid: int

    def poll(self) -> int | None: ...

    def kill(self) -> None: ...


# Starts ``argv`` as the daemon: its own session, stdin /dev/null, output to ``log``.
Spawn = Callable[[list[str], IO[bytes], dict[str, str]], Daemon]


def spawn_process(argv: list[str], log: IO[bytes], env: dict[str, str]) -> Daemon:
    return subprocess.Popen(
        argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True, env=env
    )


def running(state_dir: Path) -> LabInfo | None:
    info = read_info(state_dir)
    if info is None or not pid_alive(info.pid):
        return None
    return info


def _log_tail(path: Path, lines: int = 15) -> str:
    if not path.exists():
        return "(no log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def up(
    state_dir: Path = DEFAULT_STATE_DIR,
    *,
    drift: bool = False,
    drift_scheduling: bool = False,
    drift_capacity: bool = False,
    day_seconds: float | None = None,
    drift_training: bool = False,
    ready_delay: float = 1.0,
    system_services: bool = True,
    checkpoint_every: float = 60.0,
    reverse_replication: bool = True,
    timeout: float = 30.0,
    audit: bool = False,
    dns: str = "auto",
    dns_sync_interval: float = 3.0,
    low_priority_work: bool = False,
    slo: bool = True,
    spawn: Spawn = spawn_process,
) -> tuple[LabInfo, bool]:
    """Start the lab; returns its info and whether it was already running. ``spawn`` starts
    the daemon's process (the tests start it from one with its libraries already loaded)."""
    existing = running(state_dir)
    if existing is not None:
        for flag, have, want in (
            ("--drift", existing.drift, drift),
            ("--drift-scheduling", existing.drift_scheduling, drift_scheduling),
            ("--low-priority-work", existing.low_priority_work, low_priority_work),
            ("--drift-capacity", existing.drift_capacity, drift_capacity),
            ("--drift-training", existing.drift_training, drift_training),
            ("--slo", existing.slo, slo),
        ):
            if have != want:
                raise LabError(
                    f"the lab in {state_dir} is running {'with' if have else 'without'} "
                    f"{flag}; run `drills lab down` first"
                )
        if (dns == "external-dns") != (existing.dns_provider == "external-dns"):
            raise LabError(
                f"the lab in {state_dir} runs DNS through {existing.dns_provider}, not "
                f"--dns {dns}; run `drills lab down` first"
            )
        return existing, True
    state_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("lab.json", ERROR_FILE):
        (state_dir / stale).unlink(missing_ok=True)
    log_path = state_dir / "lab.log"
    argv = [sys.executable, "-m", "drills_lab.daemon", "--state-dir", str(state_dir)]
    argv += ["--ready-delay", str(ready_delay), "--checkpoint-every", str(checkpoint_every)]
    argv += ["--drift"] if drift else []
    argv += ["--drift-scheduling"] if drift_scheduling else []
    argv += ["--drift-capacity"] if drift_capacity else []
    argv += ["--day-seconds", str(day_seconds)] if day_seconds else []
    argv += ["--drift-training"] if drift_training else []
    argv += [] if system_services else ["--no-system-services"]
    argv += [] if reverse_replication else ["--no-reverse-replication"]
    argv += ["--audit"] if audit else []
    argv += ["--dns", dns, "--dns-sync-interval", str(dns_sync_interval)]
    argv += ["--low-priority-work"] if low_priority_work else []
    argv += [] if slo else ["--no-slo"]
    env = os.environ | {"PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    with log_path.open("ab") as log:
        child = spawn(argv, log, env)
    try:
        return _wait_until_up(child, state_dir, log_path, timeout), False
    except BaseException:
        # The daemon leads a session of its own, so Ctrl-C at the terminal does not reach it:
        # a start that fails or is interrupted would leave a lab that nobody asked for.
        child.kill()
        raise


def _wait_until_up(child: Daemon, state_dir: Path, log_path: Path, timeout: float) -> LabInfo:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = read_info(state_dir)
        if info is not None and info.pid == child.pid:
            return info
        if child.poll() is not None:
            reason = (
                (state_dir / ERROR_FILE).read_text().strip()
                if (state_dir / ERROR_FILE).exists()
                else "it exited"
            )
            raise LabError(f"the lab did not start: {reason}\n{_log_tail(log_path)}")
        time.sleep(0.05)
    raise LabError(f"the lab did not start within {timeout:.0f}s\n{_log_tail(log_path)}")


def down(state_dir: Path = DEFAULT_STATE_DIR, timeout: float = 10.0) -> bool:
    """Stop the lab and everything it started; returns whether one was running."""
    info = read_info(state_dir)
    if info is None:
        return False
    pid = info.pid
    if pid_alive(pid):
        # The daemon leads its own session; signal the group so no child is missed.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    (state_dir / "lab.json").unlink(missing_ok=True)
    return True


@dataclass(frozen=True)
class Probe:
    name: str
    url: str
    ok: bool
    detail: str


def probe(info: LabInfo) -> list[Probe]:
    """Ask each part of a running lab whether it answers. Each Kubernetes API is asked as
    kubectl would be, through its kubeconfig: trusting the lab's own CA, with its token. A
    probe says the status and its reason only: a response body is the server's, not ours to
    print. A site endpoint answering 503 is up (DR does not serve before a takeover)."""
    import httpx  # only `lab status` probes; the other lab commands start without it

    state = Path(info.state_dir)
    results = [_probe_kube(s, u, state / f"{s}.kubeconfig") for s, u in info.kube.items()]
    checks = [(f"endpoint {s}", u) for s, u in info.endpoints.items()]
    checks += [(f"registry {s}", f"{u}/v2/") for s, u in info.registries.items()]
    checks += [("moto", f"{info.moto}/moto-api/")]
    checks += [("prometheus", f"{info.prometheus}/-/ready")] if info.prometheus else []
    with httpx.Client(timeout=2.0) as client:
        for name, url in checks:
            results.append(_answer(name, url, client.get, up_on_5xx="endpoint" in name))
    return results


def _probe_kube(site: str, url: str, kubeconfig: Path) -> Probe:
    import base64
    import ssl

    import httpx
    import yaml

    name, healthz = f"kubernetes {site}", f"{url}/healthz"
    try:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        token = config["users"][0]["user"].get("token")
        trust = ssl.create_default_context()
        if "certificate-authority-data" in cluster:
            trust.load_verify_locations(
                cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
            )
    except (OSError, ValueError, KeyError, IndexError, TypeError, ssl.SSLError) as exc:
        return Probe(name, healthz, False, f"kubeconfig {kubeconfig.name}: {type(exc).__name__}")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(timeout=2.0, verify=trust, headers=headers) as client:
        return _answer(name, healthz, client.get, up_on_5xx=False)


def _answer(name: str, url: str, get: Callable[[str], Any], *, up_on_5xx: bool) -> Probe:
    import httpx

    try:
        response = get(url)
    except httpx.HTTPError as exc:
        return Probe(name, url, False, type(exc).__name__)
    detail = f"{response.status_code} {response.reason_phrase}".strip()
    return Probe(name, url, response.status_code < 500 or up_on_5xx, detail)
