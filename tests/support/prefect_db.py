"""Prefect's test harness on a database migrated once per test run.

The harness starts its server on an empty SQLite file, and the server migrates it as it
starts: about 5 of the 9 CPU-s that the start costs, paid again by every test worker. The
first worker of a run migrates one file instead (under a lock, so that the others wait for
it rather than migrate too), and each harness starts on a copy: its server finds the schema
at Prefect's head revision and has nothing to migrate.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_HARNESS_DB = "prefect-test.db"  # the file name prefect_test_harness gives its database


def migrated_database(shared_dir: Path) -> Path:
    """A Prefect database at the head revision in ``shared_dir``, made by the first caller."""
    import prefect

    template = shared_dir / f"prefect-{prefect.__version__}-migrated.db"
    with open(shared_dir / f"{template.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not template.exists():
            partial = template.with_suffix(".partial")
            partial.unlink(missing_ok=True)
            env = os.environ | {
                "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{partial}",
                "PREFECT_HOME": str(shared_dir / "prefect-migrate-home"),
            }
            done = subprocess.run(
                [sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"],
                env=env, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            assert done.returncode == 0, f"migrating a Prefect database failed:\n{done.stderr}"
            os.replace(partial, template)
    return template


@contextlib.contextmanager
def prefect_harness_on(template: Path, *, startup_timeout: int) -> Iterator[None]:
    """``prefect_test_harness``, its server started on a copy of ``template``."""
    from prefect.testing import utilities

    def directory_with_the_copy() -> str:
        directory = tempfile.mkdtemp(prefix="prefect-harness-")
        shutil.copyfile(template, Path(directory) / _HARNESS_DB)
        return directory

    with contextlib.ExitStack() as stack:
        patch = stack.enter_context(pytest.MonkeyPatch.context())
        # The harness names its database in the directory that mkdtemp gives it.
        patch.setattr(utilities, "mkdtemp", directory_with_the_copy)
        stack.enter_context(utilities.prefect_test_harness(server_startup_timeout=startup_timeout))
        patch.undo()
        yield
