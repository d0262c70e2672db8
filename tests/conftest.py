"""Session fixtures: the lab's real services, each on a free loopback port.

Each service starts on first use and stops at the end of the session, so a test run
that needs only moto never pays for BIND or the registries.
"""

from __future__ import annotations

import os
import tempfile

# Before anything imports prefect: a test run must not send telemetry.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

# The tests share no state with a demo in this checkout. `make demo` leaves its lab's
# plan and files (.lab), its Prefect server's database with deployments and scheduled
# runs (.prefect-local) and its history (.drills) in the working directory, which the
# defaults of `drills lab`, `drills serve`, `drills ui` and the flows resolve against;
# and a profile in ~/.prefect may name a server. Every default points into a directory
# of the session's instead, set before anything imports drills (the defaults are read
# at import) and inherited by every process the tests start.
os.environ["DRILLS_TESTS_STATE"] = tempfile.mkdtemp(prefix="drills-tests-")
os.environ["DRILLS_LAB_DIR"] = os.path.join(os.environ["DRILLS_TESTS_STATE"], "lab")
os.environ["DRILLS_SERVE_DIR"] = os.path.join(os.environ["DRILLS_TESTS_STATE"], "prefect-local")
os.environ["PREFECT_HOME"] = os.path.join(os.environ["DRILLS_TESTS_STATE"], "prefect-home")
os.environ["DRILLS_DB_URL"] = "sqlite:///" + os.path.join(
    os.environ["DRILLS_TESTS_STATE"], "history.db"
)  # until _history_db gives the session its own


import functools
import logging
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit as st

from drills.store.history import HistoryStore
from drills.store.outage import ALLOW_NONDURABLE_ENV
from drills.takeover.write_ahead import STATE_DIR_ENV
from drills_lab.moto_server import MotoServer
from drills_lab.named import NamedServer
from drills_lab.registry import RegistryPair, RegistryServer
from drills_lab.runtime import LabInfo
from tests.support.azurite import ACCOUNT_KEY, KEY_ENV, AzuriteServer
from tests.support.gc_tuning import collect_less
from tests.support.lab_groups import LabGroups, labs_named_in
from tests.support.ordering import UnitScheduling, longest_first
from tests.support.postgres import PostgresServer, unstarted_server
from tests.support.prefect_db import migrated_database, prefect_harness_on
from tests.support.services import (
    API_RECORD,
    FAKE_AWS_ENV,
    LAB_ZONE,
    own_lab,
    require_system_binary,
)
from tests.support.ui import EXAMPLE_PLAN, UiEnv

log = logging.getLogger("drills.tests")
collect_less()  # in every test process: the controller, each worker, the collection
_LAB_GROUPS = pytest.StashKey[LabGroups]()

# Parallel workers (pytest-xdist, `make test`) start their own servers: each draws its ports
# from a range of its own, below the kernel's ephemeral ports, so that no other worker, nor
# an outgoing connection, takes a port between its choice and its server's bind. `make test`
# runs the serial tests in a session of their own beside the others: FIRST_SLOT_ENV gives its
# workers the ranges after theirs.
FIRST_SLOT_ENV = "DRILLS_TESTS_FIRST_SLOT"
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if _WORKER.startswith("gw") and _WORKER[2:].isdigit():
    _SLOT = int(os.environ.get(FIRST_SLOT_ENV, "0")) + int(_WORKER[2:])
    if _SLOT < 8:
        _LOW = 20000 + 1500 * _SLOT
        os.environ["DRILLS_PORT_RANGE"] = f"{_LOW}-{_LOW + 1499}"


@pytest.fixture(scope="session")
def named_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamedServer]:
    """BIND serving drills.test. with api → 127.0.0.2 (TTL 30), TSIG updates allowed."""
    require_system_binary("named", "bind9")
    server = NamedServer(tmp_path_factory.mktemp("named"), zone=LAB_ZONE, records=[API_RECORD])
    started = time.monotonic()
    server.start()
    log.info("named fixture up in %.0f ms", (time.monotonic() - started) * 1000)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def registries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryPair]:
    """Two empty registries without auth: the primary site's and the DR site's."""
    require_system_binary("docker-registry", "docker-registry")
    pair = RegistryPair(
        primary=RegistryServer(tmp_path_factory.mktemp("registry-primary"), name="primary"),
        dr=RegistryServer(tmp_path_factory.mktemp("registry-dr"), name="dr"),
    )
    started = time.monotonic()
    try:
        for registry in pair:
            registry.start()
        log.info("registry fixtures up in %.0f ms", (time.monotonic() - started) * 1000)
        yield pair
    finally:
        for registry in pair:
            registry.stop()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """moto serving S3, Secrets Manager, Route 53 and ECR on one port."""
    server = MotoServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzuriteServer]:
    """Azurite's blob service on a free port, its own state directory, and its account key
    in the environment variable its settings refer to (KEY_ENV)."""
    server = AzuriteServer(tmp_path_factory.mktemp("azurite"))
    started = time.monotonic()
    server.start()
    log.info("azurite fixture up in %.0f ms", (time.monotonic() - started) * 1000)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENV, ACCOUNT_KEY)
        yield server
    server.stop()


@pytest.fixture(scope="session")
def aws_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Fake AWS credentials in the environment, and no real profile or config file.

    AWS_CA_BUNDLE is left as it is: setting it breaks rclone, and plain-HTTP moto
    never reads it.
    """
    nowhere = tmp_path_factory.mktemp("aws") / "absent"
    values = {
        **FAKE_AWS_ENV,
        "AWS_CONFIG_FILE": str(nowhere / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(nowhere / "credentials"),
    }
    with pytest.MonkeyPatch.context() as patch:
        for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL"):
            patch.delenv(name, raising=False)
        for name, value in values.items():
            patch.setenv(name, value)
        yield values


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    """The clean lab, shared read-only by every test that only looks at it."""
    with own_lab(tmp_path_factory, "lab", ready_delay=0.2) as info:
        yield info


@pytest.fixture(scope="session")
def lab_groups(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LabGroups]:
    """The grouped session labs of this process (tests.support.lab_groups)."""
    groups = LabGroups(functools.partial(own_lab, tmp_path_factory))
    request.config.stash[_LAB_GROUPS] = groups
    try:
        yield groups
    finally:
        del request.config.stash[_LAB_GROUPS]
        groups.stop_all_but(())


@pytest.fixture
def stalled_lab(lab_groups: LabGroups) -> LabInfo:
    """A lab whose DR bring-up never finishes, for cancelling drills mid-way.

    Each test that uses it must leave it as it found it (cancelled drills roll back).
    """
    from tests.support.drill import stall_dr_bring_up

    return lab_groups.get("stalled_lab", stall_dr_bring_up, ready_delay=0.2)


@pytest.fixture
def drift_lab(lab_groups: LabGroups) -> LabInfo:
    """A lab seeded with `--drift`: the faults the readiness checks must find."""
    return lab_groups.get("drift_lab", drift=True, ready_delay=0.2)


@pytest.fixture
def scheduling_drift_lab(lab_groups: LabGroups) -> LabInfo:
    """A lab seeded with `--drift-scheduling`: capacity is there, but the pods would not run."""
    return lab_groups.get("scheduling_drift_lab", drift_scheduling=True, ready_delay=0.2)


@pytest.fixture(scope="session")
def blackhole() -> Iterator[str]:
    """``host:port`` of a listener that accepts connections and never answers: a hung target."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)  # keep it open and silent

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    host, port = listener.getsockname()
    yield f"{host}:{port}"
    stop.set()
    thread.join(1)
    for conn in held:
        conn.close()
    listener.close()


@pytest.fixture()
def closed_port() -> str:
    """``host:port`` where nothing listens: connection refused."""
    from drills_lab.procs import free_port

    return f"127.0.0.1:{free_port()}"


@pytest.fixture(scope="session", autouse=True)
def _history_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Nothing a test runs may write the developer's own history store, nor its state.

    The session's PostgreSQL runs without durable commits, for speed (drills_lab.postgres):
    the tests allow it explicitly, as an operator would (tests/store/test_durability.py
    checks the refusal without it)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('history') / 'history.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DRILLS_DB_URL", url)
        patch.setenv(ALLOW_NONDURABLE_ENV, "1")
        # Runs' write-ahead files (drills.takeover.write_ahead), never in the working directory.
        patch.setenv(STATE_DIR_ENV, str(tmp_path_factory.mktemp("state")))
        yield url


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session, on loopback; each test takes a database of it."""
    server = unstarted_server()
    started = time.monotonic()
    server.start()
    log.info("postgres fixture up in %.0f ms", (time.monotonic() - started) * 1000)
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty history store of the test's own: SQLite in its tmp_path, or a new
    database on the session's PostgreSQL. Every test that takes it runs on both."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'history.db'}"
        return
    server: PostgresServer = request.getfixturevalue("postgres")
    url = server.create_database()
    yield url
    server.drop_database(url)


@pytest.fixture()
def history(db_url: str) -> Iterator[HistoryStore]:
    """An empty history store of the test's own, on SQLite and on PostgreSQL."""
    store = HistoryStore(db_url)
    yield store
    store.close()


@pytest.fixture()
def ui_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[UiEnv]:
    """No Prefect, no access configured, the example plan, an empty store of its own."""
    for name in list(os.environ):
        ours = name.startswith(("DRILLS_UI_", "DRILLS_PLANS")) or name == "PREFECT_UI_URL"
        if ours or (name.startswith("DRILLS_") and name.endswith("_DEPLOYMENT")):
            monkeypatch.delenv(name)
    db_url = f"sqlite:///{tmp_path / 'ui.db'}"
    monkeypatch.setenv("DRILLS_DB_URL", db_url)
    monkeypatch.setenv("PREFECT_API_URL", "")
    monkeypatch.setenv("DRILLS_PLANS", str(EXAMPLE_PLAN))
    # Loaders are cached per process; each test starts from what it set up.
    st.cache_data.clear()
    yield UiEnv(monkeypatch, tmp_path, db_url)
    st.cache_data.clear()


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One temporary Prefect server for the whole session: about 4 CPU-s to start, on a copy
    of a database that the first worker of the run migrated (tests.support.prefect_db)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if _WORKER else base  # the workers of one run share their parent
    with prefect_harness_on(migrated_database(shared), startup_timeout=90):
        yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items[:] = longest_first(items, config.rootpath)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: `-p no:xdist` runs without it
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> UnitScheduling | None:
    """Under ``--dist loadfile``, the files of a grouped lab run as one unit."""
    return UnitScheduling(config, log) if config.getvalue("dist") == "loadfile" else None


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After a grouped lab's last file on this worker, the lab stops (its files are next to
    each other: longest_first and UnitScheduling)."""
    groups = item.config.stash.get(_LAB_GROUPS, None)
    if groups is not None:
        following = nextitem.path if nextitem is not None else None
        groups.stop_all_but(labs_named_in(following) if following is not None else ())


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.environ["DRILLS_TESTS_STATE"], ignore_errors=True)
