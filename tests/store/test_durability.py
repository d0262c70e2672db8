"""A PostgreSQL store that may lose acknowledged commits is refused before a takeover's
first change, unless allowed explicitly; an incident goes on, warned loudly. The session's
server runs so on purpose (fsync and synchronous_commit off), which makes it the case. And a
store that does not answer at all stops `drills run` in one line."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from drills.errors import RunRefused
from drills.plan import load_plan
from drills.store.history import HistoryStore
from drills.store.outage import ALLOW_NONDURABLE_ENV, nondurable_settings
from drills.takeover.drill import Drill, DrillRequest
from drills.takeover.write_ahead import refuse_nondurable
from tests.support.drill import drills_cli, offline_lab_plan_data
from tests.support.postgres import PostgresServer, store_on


@pytest.fixture()
def pg_store(postgres: PostgresServer) -> Iterator[HistoryStore]:
    with store_on(postgres) as store:
        yield store


def test_each_setting_that_loses_commits_is_named(
    pg_store: HistoryStore, postgres: PostgresServer, tmp_path: Path
) -> None:
    assert nondurable_settings(pg_store.engine) == ["synchronous_commit=off", "fsync=off"]
    postgres.admin(f'ALTER DATABASE "{pg_store.engine.url.database}" SET synchronous_commit = on')
    pg_store.engine.dispose()  # a new session reads the database's own setting
    assert nondurable_settings(pg_store.engine) == ["fsync=off"]
    sqlite = HistoryStore(f"sqlite:///{tmp_path / 'history.db'}")
    assert nondurable_settings(sqlite.engine) == []
    sqlite.close()


def test_a_drill_is_refused_before_anything_is_recorded(
    pg_store: HistoryStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(ALLOW_NONDURABLE_ENV)
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(yaml.safe_dump(offline_lab_plan_data(), sort_keys=False))
    plan = load_plan(plan_file)
    with pytest.raises(RunRefused, match=r"synchronous_commit=off, fsync=off.*DRILLS_ALLOW_NON"):
        Drill(DrillRequest(plan, operator="tests"), pg_store).run()
    assert pg_store.list_runs() == []

    out = drills_cli("run", str(plan_file), "--yes", db=pg_store.url)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "refused: the history store does not make its commits durable" in out.stderr
    assert "Traceback" not in out.stderr
    assert pg_store.list_runs() == []


def test_an_incident_goes_on_warned_and_the_override_allows_a_drill(
    pg_store: HistoryStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(ALLOW_NONDURABLE_ENV)
    with caplog.at_level(logging.WARNING, logger="drills.takeover.write_ahead"):
        refuse_nondurable(pg_store, incident=True)
    warned = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert warned and "the incident goes on" in warned[0].getMessage()
    assert "synchronous_commit=off" in warned[0].getMessage()
    caplog.clear()
    monkeypatch.setenv(ALLOW_NONDURABLE_ENV, "1")
    with caplog.at_level(logging.WARNING, logger="drills.takeover.write_ahead"):
        refuse_nondurable(pg_store, incident=False)
    assert [r.getMessage() for r in caplog.records if "(allowed)" in r.getMessage()]


def test_a_store_that_does_not_answer_stops_a_run_in_one_line(
    closed_port: str, tmp_path: Path
) -> None:
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(yaml.safe_dump(offline_lab_plan_data(), sort_keys=False))
    out = drills_cli(
        "run", str(plan_file), "--yes", db=f"postgresql+psycopg://drills@{closed_port}/x"
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "cannot open the history store" in out.stderr and "Connection refused" in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
