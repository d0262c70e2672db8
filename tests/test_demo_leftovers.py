"""The tests run beside a demo's leftovers and share nothing with them.

`make demo` then `make down` leaves in the checkout a lab's plan and files (.lab), a
Prefect server's state directory (.prefect-local) and the history (.drills). Every
default the tests could reach them by points into the session's own directory instead
(tests/conftest.py), and the served worker runs the flows from a project directory of
its own (test_serve.py). Here a directory holding such leftovers is the working
directory of the commands the tests run: with the session's environment none of them
sees the demo; with that environment taken away, the same commands do, so the check
could fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from drills.orchestrator.serve import DEFAULT_STATE_DIR as SERVE_DIR
from drills.store.history import database_url
from drills_lab.control import DEFAULT_STATE_DIR as LAB_DIR
from tests.support.demo import DEMO_RUN, DemoLeftovers, leave_demo_state

ROOT = Path(__file__).resolve().parents[1]
ISOLATION = ("DRILLS_LAB_DIR", "DRILLS_SERVE_DIR", "DRILLS_DB_URL", "PREFECT_HOME")


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[DemoLeftovers]:
    """A checkout as a demo leaves it, with a process that looks like its server still up
    (named like Prefect's, as `drills serve` checks before it trusts a pid)."""
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "prefect"])
    try:
        yield leave_demo_state(tmp_path, server_pid=server.pid)
    finally:
        server.kill()
        server.wait()


def drills_in(demo: DemoLeftovers, *args: str, isolated: bool) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if not isolated:
        for name in ISOLATION:
            env.pop(name)
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "drills", *args],
        capture_output=True, text=True, timeout=120, cwd=demo.checkout, env=env,
    )  # fmt: skip


def test_every_default_state_of_the_session_is_outside_the_checkout() -> None:
    store = make_url(database_url()).database
    assert store is not None
    for where in (LAB_DIR, SERVE_DIR, Path(os.environ["PREFECT_HOME"]), Path(store)):
        assert where.is_absolute() and not where.resolve().is_relative_to(ROOT), where


def test_the_commands_the_tests_run_never_see_a_demos_leftovers(demo: DemoLeftovers) -> None:
    history = drills_in(demo, "history", "--json", isolated=True)
    assert history.returncode == 0, history.stderr
    assert DEMO_RUN not in history.stdout
    lab = drills_in(demo, "lab", "status", "--json", isolated=True)
    assert str(demo.lab_port) not in lab.stdout + lab.stderr
    served = drills_in(demo, "serve", "status", "--json", isolated=True)
    assert str(demo.prefect_port) not in served.stdout + served.stderr

    # The control: without the session's environment, the same commands find the demo.
    history = drills_in(demo, "history", "--json", isolated=False)
    assert DEMO_RUN in history.stdout, history.stdout + history.stderr
    lab = drills_in(demo, "lab", "status", "--json", isolated=False)
    assert str(demo.lab_port) in lab.stdout + lab.stderr
    served = drills_in(demo, "serve", "status", "--json", isolated=False)
    assert str(demo.prefect_port) in served.stdout + served.stderr


def test_the_dashboard_finds_no_plan_a_demo_left(
    demo: DemoLeftovers, monkeypatch: pytest.MonkeyPatch
) -> None:
    from drills.plan.discovery import default_plan_patterns

    monkeypatch.chdir(demo.checkout)
    assert (Path(".lab") / "plan.yaml").exists()
    assert not any(".lab" in Path(pattern).parts for pattern in default_plan_patterns())
