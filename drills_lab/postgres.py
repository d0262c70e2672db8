"""A throwaway PostgreSQL server on loopback, from Debian's `postgresql` package.

The tests start one per session (initdb and start cost about two seconds) and give each test
that wants a store a database of its own on it (CREATE DATABASE is a few tens of
milliseconds); the benchmarks start one to measure the store on PostgreSQL. Durability is
off: the data dies with the server anyway. A takeover refuses such a store unless
DRILLS_ALLOW_NONDURABLE_STORE=1, which the tests set (drills.store.outage).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from drills.errors import LabError
from drills_lab.procs import find_binary, free_port

SUPERUSER = "drills"


def find_postgres_bin_dir() -> Path | None:
    """Where initdb and pg_ctl are: Debian keeps them off PATH, under one directory a version
    (the newest wins); None when PostgreSQL is not installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    if found:
        return Path(found[-1]).parent
    initdb = find_binary("initdb")
    return Path(initdb).parent if initdb else None


def postgres_bin_dir() -> Path:
    found = find_postgres_bin_dir()
    if found is None:
        raise LabError("PostgreSQL's initdb not installed; apt-get install postgresql")
    return found


def _version(path: str) -> float:
    try:
        return float(Path(path).parent.parent.name)
    except ValueError:
        return 0.0


@dataclass
class PostgresServer:
    """initdb in a temporary directory, then pg_ctl start on a free loopback port.

    PostgreSQL refuses to run as root: as root the server runs as the ``postgres`` user the
    package creates, in a directory of its own under the system's temporary directory (the
    test's own tmp directories are not open to other users).
    """

    port: int = field(default_factory=free_port)
    root: Path = field(init=False)
    bin_dir: Path = field(default_factory=postgres_bin_dir)

    def __post_init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="drills-pg-"))
        self.data = self.root / "data"

    @property
    def _user(self) -> str | None:
        return "postgres" if os.geteuid() == 0 else None

    def _run(self, *args: str) -> None:
        done = subprocess.run(
            [str(self.bin_dir / args[0]), *args[1:]],
            capture_output=True, text=True, user=self._user, timeout=120, cwd=self.root,
        )  # fmt: skip
        if done.returncode != 0:
            raise LabError(f"{args[0]} failed: {done.stderr.strip() or done.stdout.strip()}")

    def start(self) -> None:
        if self._user:
            shutil.chown(self.root, self._user)
        self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8")
        self.resume()

    def resume(self) -> None:
        """Start the server on its data directory (again, after halt)."""
        options = (
            f"-p {self.port} -h 127.0.0.1 -k {self.root} -c max_connections=400 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"),
                  "-o", options, "-w", "-t", "60", "start")  # fmt: skip

    def halt(self) -> None:
        """Stop the server as an operator would (clients disconnected), keeping its data,
        for resume to start it again: a store outage."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def admin(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=SUPERUSER, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(statement)

    def create_database(self) -> str:
        """A new empty database; returns its SQLAlchemy URL."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        self.admin(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        self.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
