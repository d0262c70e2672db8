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


def test_a_refused_cli_incident_exits_3_and_is_audited(history: HistoryStore) -> None:
    crashed = DrillRun(id="crashed1", plan=PLAN, plan_digest="x", mode="incident", operator="t",
                       status="running", started_at=dt.datetime.now(dt.UTC))  # fmt: skip
    history.create_run(crashed)
    args = ["run", str(EXAMPLE_PLAN), "--mode", "incident", "--yes", "--operator", "olga",
            "--reason", "primary region down", "--db", history.url]  # fmt: skip
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 3, refused.output
    [event] = _audit(history)
    assert (event.action, event.who, event.plan, event.accepted, event.reason) == (
        "declare-incident", "olga", PLAN, False, "primary region down"
    )  # fmt: skip
    assert event.detail["outcome"].startswith("refused: ")
    assert "drills recover crashed1" in event.detail["outcome"]
    assert event.detail["source"] == "cli" and event.detail["plan_path"] == str(EXAMPLE_PLAN)
    assert event.detail["declared_at"] and event.detail["force_unfenced"] is False
    # The same refusal of a drill changes nothing that stays: not an audited action.
    again = CliRunner().invoke(app, [*args[:2], "--yes", "--db", history.url])
    assert again.exit_code == 3 and len(_audit(history)) == 1


def test_a_refused_cli_failback_is_audited(history: HistoryStore) -> None:
    """The plan serves from its primary: there is no way home to take."""
    args = ["run", str(EXAMPLE_PLAN), "--mode", "failback", "--yes", "--operator", "pete",
            "--reason", "primary is back", "--db", history.url]  # fmt: skip
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 3, refused.output
    [event] = _audit(history)
    assert (event.action, event.who, event.plan, event.accepted, event.reason) == (
        "fail-back", "pete", PLAN, False, "primary is back"
    )  # fmt: skip
    assert "does not serve from DR" in event.detail["outcome"]
    assert event.detail["source"] == "cli" and "declared_at" not in event.detail
