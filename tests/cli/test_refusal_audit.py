"""A refused incident or failback from the terminal is audited as the dashboard audits its
refusals: same action, who, plan and reason, and the refusal as the outcome."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from typer.testing import CliRunner

from drills.cli import app
from drills.store.history import HistoryStore
from drills.store.models import AuditEvent, DrillRun
from tests.support.ui import EXAMPLE_PLAN

PLAN = "gpu-platform"


def _audit(history: HistoryStore) -> list[AuditEvent]:
    with history.session() as s:
        return list(s.scalars(select(AuditEvent).order_by(AuditEvent.id)).all())


def _refused(history: HistoryStore, mode: str, operator: str, reason: str) -> AuditEvent:
    """`drills run --mode MODE` exits 3; the one audit entry it wrote."""
    args = ["run", str(EXAMPLE_PLAN), "--mode", mode, "--yes", "--operator", operator,
            "--reason", reason, "--db", history.url]  # fmt: skip
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 3, refused.output
    [event] = _audit(history)
    assert (event.who, event.plan, event.accepted, event.reason) == (operator, PLAN, False, reason)
    assert event.detail["outcome"].startswith("refused: ")
    assert event.detail["source"] == "cli" and event.detail["plan_path"] == str(EXAMPLE_PLAN)
    return event


def test_a_refused_cli_incident_exits_3_and_is_audited(history: HistoryStore) -> None:
    crashed = DrillRun(id="crashed1", plan=PLAN, plan_digest="x", mode="incident", operator="t",
                       status="running", started_at=dt.datetime.now(dt.UTC))  # fmt: skip
    history.create_run(crashed)
    event = _refused(history, "incident", "olga", "primary region down")
    assert event.action == "declare-incident"
    assert "drills recover crashed1" in event.detail["outcome"]
    assert event.detail["declared_at"] and event.detail["force_unfenced"] is False
    # The same refusal of a drill changes nothing that stays: not an audited action.
    again = CliRunner().invoke(app, ["run", str(EXAMPLE_PLAN), "--yes", "--db", history.url])
    assert again.exit_code == 3 and len(_audit(history)) == 1


def test_a_refused_cli_failback_is_audited(history: HistoryStore) -> None:
    """The plan serves from its primary: there is no way home to take."""
    event = _refused(history, "failback", "pete", "primary is back")
    assert event.action == "fail-back" and "does not serve from DR" in event.detail["outcome"]
    assert "declared_at" not in event.detail
