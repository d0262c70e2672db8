"""Schema migrations: a store is used only at head; `drills db upgrade` brings any store there,
keeping every run, and a store written by drills 0.1.0 (before migrations) upgrades intact."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from typer.testing import CliRunner

from drills.cli.app import app
from drills.store import schema
from drills.store.history import HistoryStore, make_engine
from drills.store.models import Base
from drills_lab.postgres import SUPERUSER
from tests.support.postgres import PostgresServer
from tests.support.rawdb import RawDatabase

FIXTURES = Path(__file__).parent.parent / "fixtures"
# Made by drills 0.1.0 on the lab: a readiness run, a drill, a dry run, an incident, two
# audit events, and the evidence chain over all of them (tests/fixtures/README.md).
RELEASE_STORE = FIXTURES / "history-0.1.0.db"
TABLES = ("drill_runs", "journal", "audit_log", "readiness_snapshots", "evidence_chain")


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, " ".join(result.output.split())


def counts(url: str) -> dict[str, int]:
    with RawDatabase(url) as db:
        return {t: db.execute(f"SELECT count(*) FROM {t}").scalar_one() for t in TABLES}


def test_a_store_of_the_last_release_upgrades_keeping_every_run(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    shutil.copy(RELEASE_STORE, path)
    url = f"sqlite:///{path}"
    before = counts(url)
    assert before == {"drill_runs": 3, "journal": 28, "audit_log": 2,
                      "readiness_snapshots": 4, "evidence_chain": 143}  # fmt: skip

    code, out = cli("history", "--db", url)
    assert code == 2 and "drills db upgrade" in out and "Traceback" not in out
    assert cli("db", "current", "--db", url)[0] == 1
    assert counts(url) == before  # refused before anything was written

    code, out = cli("db", "upgrade", "--db", url)
    assert code == 0 and f"to {schema.head()}" in out
    code, out = cli("db", "upgrade", "--db", url)
    assert code == 0 and "already at schema" in out
    assert counts(url) == before

    code, out = cli("db", "current", "--db", url, "--json")
    assert code == 0 and json.loads(out)["current"] == schema.head()
    code, out = cli("history", "--db", url, "--json")
    runs = json.loads(out)
    assert code == 0 and sorted((r["mode"], r["dry_run"], r["status"]) for r in runs) == [
        ("drill", False, "succeeded"), ("drill", True, "dry-run"), ("incident", False, "succeeded")
    ]  # fmt: skip
    code, out = cli("evidence", "verify", "--db", url)
    assert code == 0 and "143 links" in out


@pytest.mark.parametrize("way", ["migrations", "new store"])
def test_both_ways_to_head_build_the_schema_the_models_declare(db_url: str, way: str) -> None:
    engine = make_engine(db_url)
    try:
        if way == "migrations":
            assert schema.upgrade(engine) == (None, schema.head())
        else:
            HistoryStore(db_url).close()
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        assert schema.state(engine).at_head
    finally:
        engine.dispose()


def test_a_store_at_another_schema_is_refused_until_upgraded(db_url: str) -> None:
    HistoryStore(db_url).close()
    with RawDatabase(db_url) as db:
        db.execute("UPDATE alembic_version SET version_num = ?", ("0000",))
    with pytest.raises(schema.SchemaError, match=r"at schema 0000.*drills db upgrade"):
        HistoryStore(db_url)
    code, out = cli("db", "current", "--db", db_url)
    assert code == 1 and "run `drills db upgrade`" in out


def test_processes_opening_a_new_store_at_once_all_get_it_at_head(db_url: str) -> None:
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            HistoryStore(db_url).close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    engine = make_engine(db_url)
    assert schema.state(engine).at_head
    engine.dispose()


def test_a_new_store_that_cannot_be_created_says_why(postgres: PostgresServer) -> None:
    """A role without CREATE on the schema: the cause, not "written before migrations"."""
    url = postgres.create_database()
    role = f"r_{url.rsplit('_', 1)[1]}"
    postgres.admin(f'CREATE ROLE "{role}" LOGIN')
    try:
        as_role = url.replace(f"//{SUPERUSER}@", f"//{role}@")
        with pytest.raises(schema.SchemaError) as refused:
            HistoryStore(as_role)
        assert "cannot create the history store" in str(refused.value)
        assert "permission denied for schema public" in str(refused.value)
        assert "drills db upgrade" not in str(refused.value)
    finally:
        postgres.drop_database(url)
        postgres.admin(f'DROP ROLE "{role}"')
