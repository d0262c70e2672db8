"""The plan's gates against a real Alertmanager (Debian's): a firing blocking alert or a
blocked window refuses a drill and a practice (exit 3, naming it) but never an incident,
which lists them in its report; a scheduled run held back is recorded as skipped; an
Alertmanager that does not answer leaves the gate unverified."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from drills.cli import app
from drills.errors import PlanError
from drills.plan import DrillPlan, load_plan
from drills.plan.models.drill_gates import BlockedWindow
from drills.store.details import RunDetails
from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus
from drills.takeover.drill import Drill, DrillRequest
from drills.takeover.gates import BLOCKING, CLEAR, IGNORE_ACTION, evaluate, gate_run, window_state
from tests.support.alertmanager import RunningAlertmanager, alertmanager
from tests.support.drill import audit_events, offline_lab_plan_data

SELECTOR = 'alertname="DiskFull", severity=~"critical|page"'
ALWAYS = {"name": "year-round freeze", "cron": "0 0 * * *", "duration": "25h"}


@pytest.fixture(scope="module")
def am(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningAlertmanager]:
    with alertmanager(tmp_path_factory.mktemp("alertmanager")) as running:
        yield running


def plan_file(tmp_path: Path, gates: dict[str, Any]) -> Path:
    data = offline_lab_plan_data()
    data["gates"] = gates
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run(path: Path, db: str, *extra: str) -> Any:
    return CliRunner().invoke(app, ["run", str(path), "--yes", "--db", db, *extra])


def one_line(output: str) -> str:
    lines = [x for x in output.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in output, output
    return lines[0]


def test_a_cron_window_is_open_for_its_duration_after_each_opening() -> None:
    weekend = BlockedWindow(name="weekend", cron="0 18 * * 5", duration=64 * 3600.0,
                            timezone="Europe/Berlin")  # fmt: skip
    saturday = dt.datetime(2026, 12, 5, 12, 0, tzinfo=dt.UTC)
    inside = window_state(weekend, saturday)
    # Friday 18:00 in Berlin is 17:00 UTC; 64 hours on is Monday 09:00 UTC.
    assert (inside.state, inside.until) == (BLOCKING, "2026-12-07T09:00+00:00")
    assert window_state(weekend, dt.datetime(2026, 12, 7, 9, 1, tzinfo=dt.UTC)).state == CLEAR
    assert window_state(weekend, dt.datetime(2026, 12, 4, 16, 59, tzinfo=dt.UTC)).state == CLEAR


def test_dated_windows_block_whole_days_and_run_on_over_consecutive_ones() -> None:
    freeze = BlockedWindow(name="year end", dates=(dt.date(2026, 12, 24), dt.date(2026, 12, 25)))
    state = window_state(freeze, dt.datetime(2026, 12, 24, 23, 0, tzinfo=dt.UTC))
    assert (state.state, state.until) == (BLOCKING, "2026-12-26T00:00+00:00")
    assert window_state(freeze, dt.datetime(2026, 12, 26, 0, 0, tzinfo=dt.UTC)).state == CLEAR


@pytest.mark.parametrize(
    ("gates", "words"),
    [
        ({"alertmanager": {"url": "http://am:9093"}, "blocking_alerts": ["alertname=DiskFull"]},
         "is not a matcher"),
        ({"blocking_alerts": [SELECTOR]}, "blocking_alerts need an alertmanager"),
        ({"blocked_windows": [{"name": "x", "cron": "0 0 * * *"}]}, "needs both cron and duration"),
    ],
)  # fmt: skip
def test_gates_that_cannot_work_are_bad_plans(
    tmp_path: Path, gates: dict[str, Any], words: str
) -> None:
    with pytest.raises((PlanError, ValidationError)) as bad:
        load_plan(plan_file(tmp_path, gates))
    assert words in str(bad.value)


def test_a_firing_blocking_alert_refuses_a_drill_and_a_practice_naming_it(
    am: RunningAlertmanager, tmp_path: Path
) -> None:
    started = am.fire({"alertname": "DiskFull", "severity": "critical", "team": "gpu"})
    path = plan_file(tmp_path, {"alertmanager": {"url": am.url}, "blocking_alerts": [SELECTOR]})
    db = f"sqlite:///{tmp_path / 'h.db'}"
    for mode in ("drill", "practice"):
        refused = run(path, db, "--mode", mode)
        assert refused.exit_code == 3, refused.output
        line = one_line(refused.output)
        assert line.startswith("refused: gates: alert") and "DiskFull{" in line
        assert f"firing since {started[:19]}" in line
    assert HistoryStore(db).list_runs() == []  # refused before anything was recorded


def test_an_alert_that_does_not_match_leaves_the_gate_clear(
    am: RunningAlertmanager, tmp_path: Path
) -> None:
    am.fire({"alertname": "DiskFull", "severity": "warning"})
    gates = {"alertmanager": {"url": am.url}, "blocking_alerts": ['alertname="NoSuchAlert"']}
    report = evaluate(load_plan(plan_file(tmp_path, gates)))
    assert [s.state for s in report.states] == [CLEAR]


def test_an_incident_is_never_stopped_by_gates_and_its_report_lists_them(
    am: RunningAlertmanager, tmp_path: Path
) -> None:
    am.fire({"alertname": "DiskFull", "severity": "page"})
    gates = {"alertmanager": {"url": am.url}, "blocking_alerts": [SELECTOR],
             "blocked_windows": [ALWAYS]}  # fmt: skip
    db = f"sqlite:///{tmp_path / 'h.db'}"
    result = run(plan_file(tmp_path, gates), db, "--mode", "incident", "--tier-deadline", "5")
    # This plan's sites do not answer: the incident stops at its preflight, not at a gate.
    assert result.exit_code != 3 and "refused: gates" not in result.output
    [incident] = HistoryStore(db).list_runs()
    assert incident.mode == Mode.INCIDENT
    kinds = {(g["kind"], g["state"]) for g in incident.details.gates}
    assert kinds == {("window", BLOCKING), ("alert", BLOCKING)}
    report = CliRunner().invoke(app, ["report", incident.id, "--db", db])
    assert "## Gates at the start" in report.output and "year-round freeze" in report.output


def test_a_blocked_window_refuses_a_drill_and_skips_a_scheduled_one(tmp_path: Path) -> None:
    path = plan_file(tmp_path, {"blocked_windows": [ALWAYS]})
    db = f"sqlite:///{tmp_path / 'h.db'}"
    refused = run(path, db)
    assert refused.exit_code == 3, refused.output
    line = one_line(refused.output)
    assert "window year-round freeze: blocking: inside it until 20" in line
    # Asked nothing: refused before the changes are listed for confirmation.
    unasked = CliRunner().invoke(app, ["run", str(path), "--db", db], input="y\n")
    assert unasked.exit_code == 3 and "Proceed?" not in unasked.output, unasked.output

    history = HistoryStore(db)
    request = DrillRequest(load_plan(path), mode=Mode.PRACTICE, scheduled=True, operator="cron")
    result = Drill(request, history).run()
    assert (result.status, result.verdict) == (RunStatus.SKIPPED, None)
    [skipped] = history.list_runs()
    assert (skipped.status, skipped.mode) == (RunStatus.SKIPPED, Mode.PRACTICE)
    assert skipped.finished_at is not None and "year-round freeze" in (skipped.error or "")
    assert history.unfinished_runs(skipped.plan) == []
    listed = CliRunner().invoke(app, ["history", "--json", "--db", db])
    assert '"status": "skipped"' in listed.output


def test_an_alertmanager_that_does_not_answer_leaves_the_gate_unverified(
    tmp_path: Path, closed_port: str
) -> None:
    gates = {"alertmanager": {"url": f"http://{closed_port}"}, "blocking_alerts": [SELECTOR]}
    path = plan_file(tmp_path, gates)
    db = f"sqlite:///{tmp_path / 'h.db'}"
    refused = run(path, db)
    assert refused.exit_code == 3, refused.output
    line = one_line(refused.output)
    assert "unverified" in line and "--ignore-gates" in line
    no_reason = run(path, db, "--ignore-gates")
    assert no_reason.exit_code == 2 and "needs a --reason" in no_reason.output

    plan: DrillPlan = load_plan(path)
    history = HistoryStore(db)
    skipped = Drill(DrillRequest(plan, scheduled=True), history).run()
    assert skipped.status == RunStatus.SKIPPED and "unverified" in (skipped.error or "")

    ignoring = DrillRequest(plan, ignore_gates=True, operator="ana", reason="AM down, freeze off")
    assert gate_run(ignoring, history, RunDetails()) is None  # it may go on, and it is audited
    [event] = audit_events(history)
    assert (event.action, event.who, event.accepted) == (IGNORE_ACTION, "ana", True)
    assert event.reason == "AM down, freeze off"
    assert event.detail["gates"][0]["state"] == "unverified"
