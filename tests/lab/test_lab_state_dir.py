"""`lab up` gives the same lab whatever ran before in its state directory, and a start that
is interrupted leaves none.

The registries keep their blobs on disk across `lab down`: an image that `--drift` leaves
out of DR would still be there from an earlier clean lab, and the drifted lab would pass
`images.synced`. Each `up` wipes the lab's own service storage first, and nothing else.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import IO

import pytest

from drills.checks.base import Status
from drills.checks.readiness import run_readiness
from drills.plan import load_plan
from drills.processes import descendants, pid_alive
from drills_lab import control
from drills_lab.runtime import NAMED_DIR, REGISTRY_DIRS, TSIG_FILE, clear_service_storage
from tests.support.checks import DRIFT_FAILURES
from tests.support.services import LAB_START_S, require_system_binary


def failing_after_up(state: Path, *, drift: bool) -> set[str]:
    """Start a lab in ``state``, run every check (without a history: cadence only warns)."""
    control.up(state, drift=drift, ready_delay=0.1, timeout=LAB_START_S)
    try:
        report = run_readiness(load_plan(state / "plan.yaml"))
    finally:
        control.down(state)
    return {r.id for r in report.results if r.status in (Status.FAIL, Status.ERROR)}


@pytest.mark.parametrize("first", [False, True], ids=["clean then drift", "drift then clean"])
def test_the_second_lab_in_a_directory_is_the_lab_asked_for(tmp_path: Path, first: bool) -> None:
    require_system_binary("named", "bind9")
    require_system_binary("docker-registry", "docker-registry")
    state = tmp_path / "lab"
    expected = {True: DRIFT_FAILURES, False: set()}
    assert failing_after_up(state, drift=first) == expected[first]
    # The blobs of the first lab's registries were on disk until the second `up`.
    assert (state / REGISTRY_DIRS["dr"] / "storage").is_dir()
    assert failing_after_up(state, drift=not first) == expected[not first]


def test_clearing_touches_only_the_labs_own_entries(tmp_path: Path) -> None:
    state, outside = tmp_path / "lab", tmp_path / "elsewhere"
    (state / REGISTRY_DIRS["primary"] / "storage" / "blobs").mkdir(parents=True)
    (state / NAMED_DIR / "zones").mkdir(parents=True)
    (state / NAMED_DIR / "zones" / "drills.test.zone.jnl").write_text("stale journal")
    (state / TSIG_FILE).write_text("stale secret")
    outside.mkdir()
    (outside / "precious").write_text("not the lab's")
    # A registry directory that is a link to somewhere else: the link goes, never its target.
    (state / REGISTRY_DIRS["dr"]).symlink_to(outside, target_is_directory=True)
    (state / "plan.yaml").write_text("rewritten by each up, and never wiped\n")
    (state / "notes.txt").write_text("someone's own file\n")

    removed = clear_service_storage(state)

    assert sorted(p.name for p in removed) == sorted(
        [*REGISTRY_DIRS.values(), NAMED_DIR, TSIG_FILE]
    )
    assert sorted(p.name for p in state.iterdir()) == ["notes.txt", "plan.yaml"]
    assert (outside / "precious").read_text() == "not the lab's"
    assert clear_service_storage(state) == []  # nothing left of its own: a no-op


class CtrlCOnceAServiceRuns:
    """The daemon that `up` started, and Ctrl-C reaching `up` while it waits for the lab: as
    soon as the daemon has started its first service. The daemon leads a session of its own,
    so the terminal's SIGINT never reaches it or its services."""

    def __init__(self, daemon: subprocess.Popen[bytes]) -> None:
        self.daemon = daemon
        self.pid = daemon.pid
        self.services: list[int] = []

    def poll(self) -> int | None:
        self.services = descendants(self.pid)
        if self.services:
            raise KeyboardInterrupt
        return self.daemon.poll()

    def kill(self) -> None:
        self.daemon.kill()


def test_a_start_interrupted_by_ctrl_c_leaves_no_lab_running(tmp_path: Path) -> None:
    state = tmp_path / "lab"
    started: list[CtrlCOnceAServiceRuns] = []

    def spawn(argv: list[str], log: IO[bytes], env: dict[str, str]) -> CtrlCOnceAServiceRuns:
        daemon = control.spawn_process(argv, log, env)
        assert isinstance(daemon, subprocess.Popen)
        started.append(CtrlCOnceAServiceRuns(daemon))
        return started[-1]

    with pytest.raises(KeyboardInterrupt):
        control.up(state, ready_delay=0.1, timeout=LAB_START_S, spawn=spawn)

    [interrupted] = started
    try:
        assert interrupted.services, "Ctrl-C came before the daemon started a service"
        left = still_running(interrupted, within=15.0)
        assert left == [], f"the interrupted lab still runs (daemon {interrupted.pid}): {left}"
        assert control.running(state) is None
    finally:
        if interrupted.daemon.poll() is None:  # the test failed: stop it, as `lab down` would
            os.killpg(interrupted.pid, signal.SIGKILL)


def still_running(lab: CtrlCOnceAServiceRuns, *, within: float) -> list[int]:
    """The daemon and the services it had started that still run after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        lab.daemon.poll()  # reaps it once it is killed
        left = [pid for pid in [lab.pid, *lab.services] if pid_alive(pid)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)
