"""`drills metrics serve`'s figures, from a store filled as drills fills it."""

from __future__ import annotations

import datetime as dt
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select
from typer.testing import CliRunner

from drills.cli.app import app
from drills.metrics.exporter import DrillsCollector
from drills.metrics.plans import PlanCache
from drills.metrics.snapshot import CADENCE_S, Snapshotter
from drills.plan import load_plan
from drills.store.details import MeasurementRecord, RunDetails
from drills.store.history import HistoryStore
from drills.store.models import DrillRun, EvidenceEntry, Lease
from tests.support.rawdb import as_before_migrations
from tests.support.ui import EXAMPLE_PLAN

NOW = dt.datetime.now(dt.UTC)


def _run(run_id: str, mode: str, status: str, days_ago: float, **fields: Any) -> DrillRun:
    started = NOW - dt.timedelta(days=days_ago)
    values: dict[str, Any] = {
        "id": run_id, "plan": "gpu-platform", "plan_digest": "0" * 64, "mode": mode,
        "dry_run": False, "operator": "alice", "status": status, "started_at": started,
        "t0": None, "restored_at": None, "finished_at": started + dt.timedelta(minutes=5),
    }  # fmt: skip
    return DrillRun(**(values | fields))


def _readiness(history: HistoryStore) -> None:
    results = [
        {"id": "images.present", "category": "Images", "status": "fail", "blocking": True},
        {"id": "drill.cadence", "category": "Cadence", "status": "pass", "blocking": False},
        {
            "id": "data.rpo", "category": "Data", "status": "warn", "blocking": False,
            "evidence": {"datasets": [{"name": "checkpoints", "lag_s": 4000.0}]},
        },
    ]  # fmt: skip
    for age, blocking in ((3600, 0), (60, 1)):  # the newest one counts
        at = NOW - dt.timedelta(seconds=age)
        history.save_readiness("gpu-platform", at, not blocking, blocking, {"results": results})


def scrape(history: HistoryStore, paths: list[str]) -> dict[tuple[str, frozenset[Any]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DrillsCollector(Snapshotter(history, 600), PlanCache(lambda: paths)))
    text = generate_latest(registry).decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def key(name: str, **labels: str) -> tuple[str, frozenset[Any]]:
    return name, frozenset(({"plan": "gpu-platform"} | labels).items())


def value(samples: dict[tuple[str, frozenset[Any]], float], name: str, **labels: str) -> float:
    return samples[key(name, **labels)]


def test_each_figure_from_the_store_and_the_plan(history: HistoryStore) -> None:
    _readiness(history)
    measured = {"rto_seconds": 120.0, "client_rto_seconds": 150.0, "preemption_seconds": 7.5}
    full = RunDetails(measurement=MeasurementRecord(rto_seconds=120.0, full_capacity_seconds=300.0))
    history.create_run(_run("d1", "drill", "succeeded", 10, **measured, details=full,
                            rpo_seconds={"checkpoints": 30.0}))  # fmt: skip
    history.create_run(_run("d0", "drill", "succeeded", 1, dry_run=True, rto_seconds=1.0))
    history.create_run(_run("i1", "incident", "succeeded", 5, rto_seconds=2000.0))
    history.create_run(_run("dead", "drill", "running", 0.01, finished_at=None))
    samples = scrape(history, [str(EXAMPLE_PLAN)])

    status = "drills_readiness_check_status"
    failing = {"check": "images.present", "category": "Images", "blocking": "true"}
    assert value(samples, status, **failing, status="fail") == 1
    assert key(status, **failing, status="pass") not in samples  # one series a check
    assert value(samples, "drills_readiness_blocking_checks") == 1
    assert value(samples, "drills_readiness_interval_seconds") == 600
    assert NOW.timestamp() - value(samples, "drills_readiness_last_run_timestamp_seconds") < 120
    lag = {"dataset": "checkpoints"}
    assert value(samples, "drills_dataset_replication_lag_seconds", **lag) == 4000
    assert value(samples, "drills_dataset_rpo_target_seconds", **lag) == 1800
    assert key("drills_dataset_replication_lag_seconds", dataset="training-data") not in samples

    drilled = value(samples, "drills_drill_last_success_timestamp_seconds")
    assert drilled == pytest.approx((NOW - dt.timedelta(days=10, minutes=-5)).timestamp())
    due = value(samples, "drills_drill_due_in_seconds")
    # It counts down from the scrape, and NOW is when the module was imported (minutes
    # earlier in a full run): compare with the clock as it is now.
    assert due == pytest.approx(drilled + CADENCE_S - time.time(), abs=60)
    assert value(samples, "drills_run_last_rto_seconds", mode="drill") == 120  # not the dry run
    assert value(samples, "drills_run_last_client_rto_seconds", mode="drill") == 150
    assert value(samples, "drills_run_last_rpo_seconds", mode="drill", dataset="checkpoints") == 30
    assert value(samples, "drills_run_last_full_capacity_seconds", mode="drill") == 300
    assert value(samples, "drills_run_last_rto_seconds", mode="incident") == 2000
    # An incident recorded before full capacity was measured has no such series.
    assert key("drills_run_last_full_capacity_seconds", mode="incident") not in samples
    assert value(samples, "drills_run_last_preemption_seconds", mode="drill") == 7.5
    assert key("drills_run_last_preemption_seconds", mode="incident") not in samples
    assert value(samples, "drills_plan_rto_target_seconds") == 1800
    with history.session() as s:
        links = s.scalar(select(func.count()).select_from(EvidenceEntry))
    assert links and value(samples, "drills_evidence_chain_length") == links

    # No process holds the running drill's lease: stuck, and the plan is in transition.
    assert value(samples, "drills_runs_stuck", mode="drill") == 1
    assert value(samples, "drills_runs_in_progress", mode="drill") == 0
    assert value(samples, "drills_plan_serving_site", site="in-transition") == 1
    with history.session() as s:
        # Live from the clock as it is now: NOW was taken at import, minutes ago in a full run.
        s.add(Lease(plan="gpu-platform", holder="me", run_id="dead",
                    expires_at=dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)))  # fmt: skip
    samples = scrape(history, [str(EXAMPLE_PLAN)])
    assert value(samples, "drills_runs_in_progress", mode="drill") == 1
    assert value(samples, "drills_runs_stuck", mode="drill") == 0


def test_a_completed_incident_leaves_dr_serving_until_it_is_failed_back(
    history: HistoryStore,
) -> None:
    history.create_run(_run("i1", "incident", "recovered", 5))
    samples = scrape(history, [str(EXAMPLE_PLAN)])
    assert value(samples, "drills_plan_serving_site", site="dr") == 1
    assert value(samples, "drills_plan_serving_site", site="primary") == 0
    # A drill cannot start at DR; a successful failback is what brings it home.
    history.create_run(_run("f1", "failback", "succeeded", 1))
    samples = scrape(history, [str(EXAMPLE_PLAN)])
    assert value(samples, "drills_plan_serving_site", site="primary") == 1


def test_an_empty_store_says_never_and_a_bad_file_is_counted(
    history: HistoryStore, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [\n")
    samples = scrape(history, [str(EXAMPLE_PLAN), str(bad)])
    assert value(samples, "drills_readiness_last_run_timestamp_seconds") == 0
    assert value(samples, "drills_drill_last_success_timestamp_seconds") == 0
    assert value(samples, "drills_drill_due_in_seconds") < 0
    assert value(samples, "drills_plan_serving_site", site="primary") == 1
    assert samples[("drills_plan_files_invalid", frozenset())] == 1


def test_a_plan_file_is_parsed_again_only_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(EXAMPLE_PLAN.read_text())
    cache = PlanCache(lambda: [str(path)])
    first = cache.load().plans[0]
    assert cache.load().plans[0] is first
    path.write_text(EXAMPLE_PLAN.read_text().replace("name: gpu-platform", "name: renamed", 1))
    assert cache.load().plans[0].name == "renamed"
    assert load_plan(EXAMPLE_PLAN).name == "gpu-platform"


def test_an_existing_store_gets_the_new_indexes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    HistoryStore(url).close()
    as_before_migrations(url)
    with sqlite3.connect(tmp_path / "old.db") as conn:  # as an early 0.1.0 store was
        conn.execute("DROP INDEX ix_run_finished")
    assert CliRunner().invoke(app, ["db", "upgrade", "--db", url]).exit_code == 0
    with sqlite3.connect(tmp_path / "old.db") as conn:
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert {"ix_run_finished", "ix_run_plan_mode_started"} <= names


def test_slo_results_of_the_newest_finished_drill_and_incident(history: HistoryStore) -> None:
    held = {"name": "latency", "status": "held", "last_value": 0.2}
    breached = {"name": "errors", "status": "breached", "last_value": 0.07}
    # An older drill's SLOs are not the newest; a rolled-back drill's are, verdict or not.
    history.create_run(
        _run(
            "old",
            "drill",
            "succeeded",
            9,
            details=RunDetails(slo=[{"name": "latency", "status": "breached"}]),
        )
    )
    history.create_run(
        _run("new", "drill", "rolled-back", 2, details=RunDetails(slo=[held, breached]))
    )
    history.create_run(
        _run(
            "inc",
            "incident",
            "succeeded",
            1,
            details=RunDetails(slo=[{"name": "latency", "status": "unverified"}]),
        )
    )
    samples = scrape(history, [str(EXAMPLE_PLAN)])  # fmt: skip
    ok = "drills_run_last_slo_ok"
    assert value(samples, ok, mode="drill", slo="latency", status="held") == 1
    assert value(samples, ok, mode="drill", slo="errors", status="breached") == 0
    assert key(ok, mode="drill", slo="latency", status="breached") not in samples
    assert value(samples, ok, mode="incident", slo="latency", status="unverified") == 0
    assert value(samples, "drills_run_last_slo_value", mode="drill", slo="errors") == 0.07
    # Nothing read: no value series.
    assert key("drills_run_last_slo_value", mode="incident", slo="latency") not in samples
