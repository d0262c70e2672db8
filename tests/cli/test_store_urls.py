"""A history store URL that cannot be opened is one line and a non-zero exit, from every
command that takes `--db` / `DRILLS_DB_URL`: never a traceback, never the password.

The URLs are the class the hostile set found (each once printed a Rich traceback): no
database, one that does not exist, a driver not installed or async, a scheme that is not
a database, a port out of range, a directory, nothing at all, a server that refuses.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from drills.cli.app import app
from drills_lab.procs import free_port
from tests.support.cli import drills_process
from tests.support.drill import offline_lab_plan_text

PASSWORD = "Hunter2StorePw"
runner = CliRunner()


def _urls(tmp: Path) -> dict[str, str]:
    closed = free_port()
    return {
        "in-memory sqlite": "sqlite://",
        "sqlite in no directory": "sqlite:////nonexistent/dir/x.db",
        "sqlite on a directory": f"sqlite:///{tmp}",
        "postgresql, no host": "postgresql://",
        "postgresql refusing": f"postgresql+psycopg://user:{PASSWORD}@127.0.0.1:{closed}/db",
        "default driver refusing": f"postgresql://user:{PASSWORD}@127.0.0.1:{closed}/db",
        "port out of range": f"postgresql+psycopg://user:{PASSWORD}@h:99999/db",
        "async driver": f"postgresql+asyncpg://user:{PASSWORD}@127.0.0.1/db",
        "mysql": f"mysql://user:{PASSWORD}@x/db",
        "not a URL": "foo",
        "http": f"http://user:{PASSWORD}@x/",
        "empty": "",
    }


URL_CASES = list(_urls(Path("/tmp")))


def commands(tmp: Path) -> list[list[str]]:
    plan = tmp / "plan.yaml"
    plan.write_text(offline_lab_plan_text())
    return [
        ["history"],
        ["report", "no-such-run"],
        ["status", str(plan), "--no-live"],
        ["readiness", str(plan)],
        ["forecast", str(plan)],
        ["run", str(plan), "--dry-run", "--yes"],
        ["recover"],
        ["evidence", "export", "no-such-run", "--out", str(tmp / "pack.zip")],
        ["evidence", "coverage"],
        ["db", "current"],
        ["db", "upgrade"],
        ["db", "prune", "--older-than", "30d"],
        ["metrics", "serve", "--port", str(free_port())],
    ]


def assert_one_clear_line(output: str, code: int) -> None:
    lines = [line for line in output.splitlines() if line.strip()]
    assert code not in (0, None), output
    assert len(lines) == 1 and lines[0].startswith("✗ "), output
    assert "Traceback" not in output and "Error:" not in output
    assert PASSWORD not in output


@pytest.mark.parametrize("case", URL_CASES)
def test_every_store_command_says_one_line(case: str, tmp_path: Path) -> None:
    url = _urls(tmp_path)[case]
    for args in commands(tmp_path):
        result = runner.invoke(app, args, env={"DRILLS_DB_URL": url, "COLUMNS": "80"})
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            args,
            repr(result.exception),
        )
        assert_one_clear_line(result.stderr, result.exit_code)
        assert result.stdout.strip() == "", (args, result.stdout)


@pytest.mark.parametrize("case", URL_CASES)
def test_the_installed_command_says_one_line(case: str, tmp_path: Path) -> None:
    """As an operator runs it: its own process, both ways of giving the URL."""
    url = _urls(tmp_path)[case]
    env_given = drills_process(["history"], timeout=120, env=dict(os.environ, DRILLS_DB_URL=url))
    assert_one_clear_line(env_given.stdout + env_given.stderr, env_given.returncode)
    if case in ("postgresql refusing", "http"):  # the option takes the same path
        flag_given = drills_process(["history", "--db", url], timeout=120)
        assert_one_clear_line(flag_given.stdout + flag_given.stderr, flag_given.returncode)


def test_the_dashboard_refuses_before_it_starts(tmp_path: Path) -> None:
    url = _urls(tmp_path)["postgresql refusing"]
    done = subprocess.run(
        [sys.executable, "-m", "drills", "ui", "--port", str(free_port()), "--db", url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert_one_clear_line(done.stdout + done.stderr, done.returncode)
    assert "cannot open the history store postgresql+psycopg://***@127.0.0.1:" in done.stderr


@pytest.mark.parametrize(
    ("case", "says", "code"),
    [
        ("in-memory sqlite", "is an in-memory SQLite database: it keeps nothing", 2),
        ("sqlite in no directory", "the directory /nonexistent/dir does not exist", 2),
        ("sqlite on a directory", "is a directory; give a file in it", 2),
        ("postgresql refusing", "Connection refused", 1),
        ("port out of range", "port 99999 is not a port (1-65535)", 2),
        ("async driver", "the async driver 'asyncpg' cannot serve the history store", 2),
        ("mysql", "the history store is SQLite or PostgreSQL, not 'mysql'", 2),
        ("not a URL", "foo is not a history store URL", 2),
        ("empty", "the history store URL is empty", 2),
    ],
)
def test_each_says_what_is_wrong(case: str, says: str, code: int, tmp_path: Path) -> None:
    result = runner.invoke(app, ["history"], env={"DRILLS_DB_URL": _urls(tmp_path)[case]})
    assert says in result.stderr and result.exit_code == code, result.stderr


def test_a_good_store_still_opens(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new' / 'history.db'}"  # one directory level is made
    result = runner.invoke(app, ["history", "--json"], env={"DRILLS_DB_URL": url})
    assert result.exit_code == 0, result.output
    assert (tmp_path / "new" / "history.db").is_file()
