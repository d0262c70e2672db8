"""`drills run --mode incident --detected-at`: the detection an operator gives by hand is
recorded on the incident, shown by the report and `drills history --json` as the timeline
detection → declaration → fence → service restored → DR carrying, and measured as
`detection_seconds` (and the drills_run_last_detection_seconds metric). Bad input is one
line and exit 2."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from drills.cli import app
from drills.plan import load_plan
from drills.store.details import DetectionRecord, MeasurementRecord, RunDetails
from drills.store.history import HistoryStore
from drills.store.kinds import Mode
from drills.store.models import DrillRun
from drills.takeover.proposals import parse_notification, receive
from tests.metrics.test_exporter import scrape, value
from tests.support.drill import offline_lab_plan_data
from tests.support.ui import EXAMPLE_PLAN


@pytest.fixture()
def plan_path(tmp_path: Path) -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(offline_lab_plan_data(), sort_keys=False))
    return path


def _one_line(output: str) -> str:
    lines = [x for x in output.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in output, output
    return lines[0]


@pytest.mark.parametrize(
    ("given", "mode", "words"),
    [
        ("yesterday at noon", "incident", "is not an ISO 8601 time"),
        ("2999-01-01T00:00:00Z", "incident", "is in the future"),
        ("2026-12-01T00:00:00Z", "drill", "only makes sense with --mode incident"),
    ],
)
def test_a_bad_detected_at_is_one_line_and_exit_2(
    plan_path: Path, tmp_path: Path, given: str, mode: str, words: str
) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    result = CliRunner().invoke(
        app, ["run", str(plan_path), "--mode", mode, "--yes", "--db", db, "--detected-at", given]
    )
    assert result.exit_code == 2
    assert words in _one_line(result.output)


def test_detected_at_by_hand_is_recorded_and_shown_in_the_history(
    plan_path: Path, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    detected = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=7)).replace(microsecond=0)
    given = detected.replace(tzinfo=None).isoformat()  # no zone: taken as UTC
    before = dt.datetime.now(dt.UTC)
    result = CliRunner().invoke(app, ["run", str(plan_path), "--mode", "incident", "--yes",
                                      "--db", db, "--detected-at", given,
                                      "--tier-deadline", "5"])  # fmt: skip
    assert "Traceback" not in result.output
    [incident] = HistoryStore(db).list_runs()  # the sites do not answer: stopped, recorded
    detection = incident.details.detection
    assert detection is not None and detection.detected_at == detected
    assert detection.source == "operator" and detection.proposal is None
    assert detection.detection_seconds is not None
    assert (before - detected).total_seconds() <= detection.detection_seconds < 7 * 60 + 60

    listed = CliRunner().invoke(app, ["history", "--json", "--db", db])
    [row] = json.loads(listed.output)
    assert row["detected_at"] == detected.isoformat()
    assert row["detection_seconds"] == detection.detection_seconds
    chain = row["detection_chain"]
    assert [m["moment"] for m in chain][:2] == ["detection", "declaration"]
    assert chain[0]["at"] == detected.isoformat()
    assert chain[1]["since_detection_seconds"] == detection.detection_seconds
    report = CliRunner().invoke(app, ["report", incident.id, "--db", db, "--format", "markdown"])
    assert "## Detection to DR carrying" in report.output


def test_the_last_incidents_detection_is_a_metric(tmp_path: Path) -> None:
    history = HistoryStore(f"sqlite:///{tmp_path / 'h.db'}")
    t0 = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    detected = t0 - dt.timedelta(seconds=412)
    details = RunDetails(
        detection=DetectionRecord(detected_at=detected, source="alert", detection_seconds=412.0),
        measurement=MeasurementRecord(t0=t0, full_capacity_seconds=300.0),
    )
    history.create_run(
        DrillRun(
            id="inc1", plan="gpu-platform", plan_digest="0" * 64, mode=Mode.INCIDENT,
            dry_run=False, operator="dana", status="succeeded", started_at=t0, t0=t0,
            restored_at=t0 + dt.timedelta(seconds=120), finished_at=t0 + dt.timedelta(minutes=5),
            rto_seconds=120.0, details=details,
        )
    )  # fmt: skip
    body = {"version": "4", "groupKey": "g", "status": "firing", "alerts": [
        {"status": "firing", "labels": {"alertname": "PrimaryRegionDown", "severity": "page"},
         "startsAt": detected.isoformat(), "endsAt": "0001-01-01T00:00:00Z",
         "fingerprint": "0a1b2c3d4e5f6a7b"}]}  # fmt: skip
    receive(parse_notification(json.dumps(body).encode()), [load_plan(EXAMPLE_PLAN)], history)
    samples = scrape(history, [str(EXAMPLE_PLAN)])
    labels = {"plan": "gpu-platform", "mode": "incident"}
    assert value(samples, "drills_run_last_detection_seconds", **labels) == 412.0
    assert value(samples, "drills_run_last_rto_seconds", **labels) == 120.0
    # The example plan's declare_on matched: one proposal waits for an operator.
    assert value(samples, "drills_incident_proposals_pending", plan="gpu-platform") == 1.0
