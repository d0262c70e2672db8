"""Notifications with real receivers: Apprise's json:// to an HTTP server of the test, and
mailto:// to a local aiosmtpd. A message on each change, none while nothing changes, no
secret in any, and a target that cannot be reached never fails or holds a run."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from drills.checks.readiness import run_readiness
from drills.errors import PlanError
from drills.notify import EventKind, Notice, Severity, notify, readiness_changes
from drills.notify.deliver import (
    DEADLINE_S,
    EXIT_FLUSH_S,
    Sender,
    resolve_targets,
    target_label,
)
from drills.notify.render import render
from drills.notify.runs import run_finished
from drills.plan import load_plan, plan_from_text
from drills.store.history import HistoryStore
from drills_lab.runtime import LabInfo
from tests.support.checks import DRIFT_FAILURES, drilled_days_ago
from tests.support.cli import drills_process
from tests.support.drill import drills_cli
from tests.support.receivers import json_receiver, smtp_receiver
from tests.support.services import own_lab

UI_URL = "http://drills-ui.example.test:8501"
EXAMPLE = Path(__file__).resolve().parents[2] / "plans" / "gpu-platform.example.yaml"


def readiness_cli(
    plan: Path, db: str, notify_to: str, *args: str
) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"DRILLS_NOTIFY": notify_to, "DRILLS_UI_URL": UI_URL, "COLUMNS": "200"}
    return drills_process(["readiness", str(plan), "--db", db, *args], timeout=120, env=env)


def plan_file(info: LabInfo) -> Path:
    return Path(info.state_dir) / "plan.yaml"


# --- end to end on the labs -------------------------------------------------------------


def test_a_drifted_lab_is_told_once_then_nothing_then_back_to_pass(
    drift_lab: LabInfo, lab: LabInfo, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    drilled_days_ago(db, "lab", 10)  # the cadence is fine: only the drift changes
    with json_receiver() as hook:
        first = readiness_cli(plan_file(drift_lab), db, hook.url(), "-v")
        assert first.returncode == 1, first.stderr
        assert "tampered" not in first.stderr  # exit 1 for the drift, not a refused store
        # The CLI waits for its deliveries at exit (bounded), so they are in by now.
        got = hook.messages()
        assert len(got) == 1, got
        message = got[0]
        assert set(message) >= {"version", "title", "message", "type"}
        assert message["type"] == "failure"
        for check in DRIFT_FAILURES:
            assert check in message["title"] and f"now failing: {check}" in message["message"]
        assert "Plan: lab" in message["message"]
        assert "Remediation:" in message["message"]
        assert f"Dashboard: {UI_URL}/readiness" in message["message"]
        assert "notifications" in first.stdout and "delivered" in first.stdout

        second = readiness_cli(plan_file(drift_lab), db, hook.url(), "-v")
        assert second.returncode == 1
        assert hook.count() == 1, "a message was repeated while nothing changed"
        assert "nothing changed since the last stored run" in second.stdout

        # The clean lab has the same plan name: its snapshot is the drift fixed.
        fixed = readiness_cli(plan_file(lab), db, hook.url(), "-v")
        assert fixed.returncode == 0, fixed.stdout
        got = hook.messages()
        assert len(got) == 2, got
        assert got[1]["type"] == "success"
        assert "back to pass" in got[1]["title"]
        for check in DRIFT_FAILURES:
            assert f"back to pass: {check}" in got[1]["message"]


def test_an_unreachable_target_never_fails_or_holds_the_run(
    drift_lab: LabInfo, tmp_path: Path, closed_port: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    monkeypatch.setenv("DRILLS_NOTIFY", f"json://{closed_port}/hook")
    history = HistoryStore(db)
    try:
        report = run_readiness(load_plan(plan_file(drift_lab)), history=history)
        # The run is back while its message is still being tried: sending is not part of it.
        assert report.notices and not report.deliveries.done
        deliveries = report.deliveries.wait(DEADLINE_S + 5)
    finally:
        history.close()
    # The readiness change, and the drill overdue (never drilled in this store).
    assert [d.status for d in deliveries] == ["not delivered"] * 2, deliveries
    assert deliveries[0].attempts >= 2  # retried, within the bound
    assert deliveries[1].detail == "failed earlier"  # not tried again in the same batch
    assert deliveries[0].target == f"DRILLS_NOTIFY#1 → json://{closed_port}"
    # The bound, structurally: one deadline per batch, every attempt included, and a
    # process waits at most EXIT_FLUSH_S at exit for messages still going.
    assert Sender().deadline_s == DEADLINE_S <= 15 and EXIT_FLUSH_S <= 5

    shown = readiness_cli(plan_file(drift_lab), f"sqlite:///{tmp_path / 'cli.db'}",
                          f"json://{closed_port}/hook", "-v")  # fmt: skip
    assert shown.returncode == 1 and "Traceback" not in shown.stderr
    assert f"json://{closed_port}: not delivered" in " ".join(shown.stdout.split())


def test_a_report_with_its_deliveries_can_be_cached() -> None:
    """The dashboard caches readiness reports with st.cache_data, which pickles them."""
    import pickle

    notice = Notice(EventKind.RUN_STARTED, "p", "t", ("x",))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DRILLS_NOTIFY", "json://127.0.0.1:9/x")
        batch = notify([notice])
        copy = pickle.loads(pickle.dumps(batch))
        batch.wait(DEADLINE_S)
    assert copy.done and copy.titles == ("[drills] t",)


def test_mail_arrives_at_a_real_smtp_server() -> None:
    notice = Notice(
        EventKind.INCIDENT_DECLARED, "lab", "lab: incident declared by alice",
        ("incident declared by alice",), Severity.FAILURE, ("Follow the takeover.",), "declare",
    )  # fmt: skip
    with smtp_receiver() as mail, pytest.MonkeyPatch.context() as patch:
        patch.setenv("DRILLS_NOTIFY", mail.url())
        patch.setenv("DRILLS_UI_URL", UI_URL)
        deliveries = notify([notice]).wait(DEADLINE_S)
        got = mail.wait_for(1)
    assert [d.status for d in deliveries] == ["delivered"], deliveries
    assert deliveries[0].target == f"DRILLS_NOTIFY#1 → mailto://127.0.0.1:{mail.port}"
    text = got[0].decode()
    assert "Subject: [drills] lab: incident declared by alice" in text
    assert "To: sre@example.test" in text
    assert "incident declared by alice" in text and f"{UI_URL}/declare" in text


# --- the plan's notify: ----------------------------------------------------------------------


def _example_with(notify_refs: list[Any]) -> str:
    data = yaml.safe_load(EXAMPLE.read_text())
    data["notify"] = notify_refs
    return yaml.safe_dump(data, sort_keys=False)


def test_the_plan_names_targets_by_reference_only(monkeypatch: pytest.MonkeyPatch) -> None:
    literal = "json://hooks.example.test/T0K3N-s3cr3t-value"
    with pytest.raises(PlanError) as refused:
        plan_from_text(_example_with([literal]), "p.yaml")
    assert "literal credential" in str(refused.value)
    assert "T0K3N" not in str(refused.value)

    with json_receiver() as hook:
        monkeypatch.setenv("DRILLS_TEST_HOOK", f"{hook.url(auth='bot:T0K3N-s3cr3t-value@')}")
        monkeypatch.delenv("DRILLS_NOTIFY", raising=False)
        plan = plan_from_text(_example_with(["env:DRILLS_TEST_HOOK", "env:DRILLS_UNSET_HOOK"]))
        targets, problems = resolve_targets(plan, None)
        assert [t.label for t in targets] == [
            f"env:DRILLS_TEST_HOOK → json://127.0.0.1:{hook.port}"
        ]
        assert "T0K3N" not in repr(targets)
        assert [p.target for p in problems] == ["env:DRILLS_UNSET_HOOK"]
        assert "is not set" in problems[0].detail

        notice = Notice(EventKind.RUN_STARTED, plan.name, "t", ("x",))
        deliveries = notify([notice], plan).wait(DEADLINE_S)
        assert sorted(d.status for d in deliveries) == ["delivered", "not delivered"]
        assert hook.count() == 1


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("json://user:pw@hooks.example.com:8080/p?token=x", "json://hooks.example.com:8080"),
        ("tgram://123456789:AAbbCCdd/4242", "tgram://…"),
        ("slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ", "slack://…"),
        ("mailto://127.0.0.1:25?from=a@b.test", "mailto://127.0.0.1:25"),
    ],
)
def test_a_target_is_shown_without_its_token(url: str, shown: str) -> None:
    assert target_label(url, "env:X") == f"env:X → {shown}"


# --- what changes deserve a message -------------------------------------------------------


def _report(at: dt.datetime, **statuses: str) -> dict[str, Any]:
    return {
        "plan": "p",
        "checked_at": at.isoformat(),
        "results": [
            {"id": cid, "status": status, "blocking": True, "summary": f"{cid} is {status}",
             "evidence": {}, "remediation": f"fix {cid}"}
            for cid, status in statuses.items()
        ],
    }  # fmt: skip


def test_once_per_change_never_while_it_stays_and_a_reminder_per_period() -> None:
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    step = dt.timedelta(minutes=15)
    runs = [
        _report(t0, a="pass", b="pass"),
        _report(t0 + step, a="fail", b="pass"),
        _report(t0 + 2 * step, a="fail", b="pass"),
        _report(t0 + 3 * step, a="error", b="warn"),
        _report(t0 + 4 * step, a="pass", b="pass"),
    ]
    previous: dict[str, Any] | None = None
    told: list[list[str]] = []
    for report in runs:
        changes = readiness_changes("p", previous, report)
        told.append([n.title for n in changes.notices])
        previous = {**report, "failing_since": changes.failing_since}
    assert told == [[], ["p: readiness failing: a"], [], [], ["p: readiness back to pass: a"]]

    # With a reminder every 30 minutes: one at 30 min and one at 60, none in between.
    previous, reminders = None, []
    for i in range(6):
        report = _report(t0 + i * step, a="fail")
        changes = readiness_changes("p", previous, report, remind_after=1800)
        reminders += [i for n in changes.notices if n.kind == EventKind.READINESS_REMINDER]
        previous = {**report, "failing_since": changes.failing_since}
    assert reminders == [2, 4]


def test_a_drill_due_soon_or_overdue_is_told_once() -> None:
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def cadence(at: dt.datetime, due_in: float | None, status: str) -> dict[str, Any]:
        report = _report(at, **{"drill.cadence": status})
        report["results"][0]["evidence"] = {"due_in_days": due_in} if due_in is not None else {}
        return report

    seq = [cadence(t0, 20, "pass"), cadence(t0, 13, "pass"), cadence(t0, 12, "pass"),
           cadence(t0, -1, "fail"), cadence(t0, -2, "fail")]  # fmt: skip
    kinds, previous = [], None
    for report in seq:
        kinds.append([n.kind for n in readiness_changes("p", previous, report).notices])
        previous = report
    assert kinds == [[], [EventKind.DRILL_DUE], [], [EventKind.DRILL_OVERDUE], []]
    never = readiness_changes("p", None, cadence(t0, None, "fail")).notices
    assert [n.kind for n in never] == [EventKind.DRILL_OVERDUE]


def test_a_finished_run_says_verdict_rto_and_rpo() -> None:
    notice = run_finished(
        "lab", "abc123", "drill", status="succeeded", verdict="met", rto_s=2.25, rto_target_s=900,
        rpo_s={"checkpoints": 30.0}, rpo_target_s=3600, error=None,
    )  # fmt: skip
    title, body = render(notice, UI_URL)
    assert title == "[drills] lab: drill succeeded, verdict met (run abc123)"
    assert "RTO 2.25 s (target 15 min)" in body
    assert "RPO 30 s (target 1 h)" in body
    assert f"Dashboard: {UI_URL}/history" in body
    assert notice.payload["rto_seconds"] == 2.25


# --- Prefect events ------------------------------------------------------------------------


def test_the_readiness_flow_emits_prefect_events(
    prefect_harness: None, drift_lab: LabInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from prefect.client.orchestration import get_client
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter

    from flows.readiness import readiness_check

    monkeypatch.setenv("DRILLS_DB_URL", f"sqlite:///{tmp_path / 'h.db'}")
    monkeypatch.delenv("DRILLS_NOTIFY", raising=False)
    state = readiness_check(plan=str(plan_file(drift_lab)), return_state=True)
    assert state.is_completed(), state

    async def events() -> list[Any]:
        found: list[Any] = []
        async with get_client() as client:
            for _ in range(100):
                page = await client.read_events(
                    filter=EventFilter(
                        event=EventNameFilter(prefix=["drills."]),
                        resource=EventResourceFilter(id=["drills.plan.lab"]),
                    ),
                    limit=50,
                )
                found = page.events
                # Both, not the first: the server persists events in batches, and one batch
                # can hold the change without the overdue notice emitted after it.
                if {"drills.readiness.changed", "drills.drill.overdue"} <= {e.event for e in found}:
                    break
                await asyncio.sleep(0.2)
        return found

    found = asyncio.run(events())
    changed = [e for e in found if e.event == "drills.readiness.changed"]
    assert changed, [e.event for e in found]
    assert set(changed[0].payload["failing"]) >= DRIFT_FAILURES
    assert changed[0].resource.id == "drills.plan.lab"
    names = [e.event for e in found]
    assert "drills.drill.overdue" in names, names  # never drilled in that store


def test_a_drill_is_told_when_it_starts_and_when_it_ends(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real drill through the CLI, on a lab of its own: one message as it starts, one
    with its verdict, RTO and RPO as it ends; and none for a dry run."""
    db = f"sqlite:///{tmp_path / 'h.db'}"
    with own_lab(tmp_path_factory, "notify-lab", ready_delay=0.2) as info, json_receiver() as hook:
        monkeypatch.setenv("DRILLS_NOTIFY", hook.url())
        monkeypatch.setenv("DRILLS_UI_URL", UI_URL)
        dry = drills_cli("run", str(plan_file(info)), "--dry-run", db=db)
        assert dry.returncode == 0, dry.stdout + dry.stderr
        ran = drills_cli("run", str(plan_file(info)), "--yes", "--reason", "quarterly", db=db)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        # Readiness at preflight may tell its own news; the run's two messages are these.
        runs = [m for m in hook.messages() if m["title"].startswith("[drills] lab: drill ")]
    assert len(runs) == 2, runs
    started, finished = runs
    assert "lab: drill started" in started["title"] and "reason: quarterly" in started["message"]
    assert "ended succeeded, verdict met" in finished["message"]
    assert "RTO " in finished["message"] and "(target 5 min)" in finished["message"]
    assert "RPO of " in finished["message"]
