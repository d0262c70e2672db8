"""A proposed incident on the Incident page (AppTest, the session's Prefect test server):
held with its alert and startsAt until an operator approves it; the approval starts the
real incident deployment with detected_at the alert's startsAt, and the flow run, given
those parameters, records detected_at and detection_seconds on the incident. Nothing
starts without the approval; a withdrawn proposal cannot be approved."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from drills.errors import DrillError
from drills.plan import DrillPlan, load_plan
from drills.store import proposals as stored
from drills.store.details import DetectionRecord, RunDetails
from drills.store.history import HistoryStore
from drills.store.kinds import Mode
from drills.store.models import AuditEvent, DrillRun
from drills.store.report import report_data
from drills.takeover.proposals import APPROVE_ACTION, parse_notification, receive
from tests.support.drill import offline_lab_plan_data
from tests.support.ui import UiEnv, delete_flow_runs, flow_runs, open_page, shown

DECLARE_ON = 'alertname="PrimaryRegionDown"'


@pytest.fixture()
def proposal_env(ui_env: UiEnv, prefect_url: str, incident_deployment: str) -> Iterator[Path]:
    """A plan whose sites do not answer (an incident stops at its preflight, touching no
    lab), with declare_on; the Prefect test server; lab mode. Yields the plan file."""
    data = offline_lab_plan_data()
    data["declare_on"] = [DECLARE_ON]
    path = ui_env.tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    ui_env.set("DRILLS_PLANS", str(path))
    ui_env.set("PREFECT_API_URL", prefect_url)
    ui_env.set("DRILLS_INCIDENT_DEPLOYMENT", incident_deployment)
    ui_env.set("DRILLS_UI_LAB", "1")
    delete_flow_runs(prefect_url, incident_deployment)
    yield path
    delete_flow_runs(prefect_url, incident_deployment)


def _notify(plan: DrillPlan, store: HistoryStore, status: str, starts_at: str) -> str:
    """A notification as Alertmanager sends it; returns the proposal it touched."""
    body = {
        "version": "4", "groupKey": '{}:{alertname="PrimaryRegionDown"}', "status": status,
        "receiver": "drills", "groupLabels": {"alertname": "PrimaryRegionDown"},
        "commonLabels": {}, "commonAnnotations": {}, "externalURL": "http://am",
        "truncatedAlerts": 0,
        "alerts": [{"status": status, "labels": {"alertname": "PrimaryRegionDown", "site": "use1"},
                    "annotations": {"summary": "use1 answers nothing"}, "startsAt": starts_at,
                    "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "",
                    "fingerprint": "4c7e0d3a9b1f2e68"}],
    }  # fmt: skip
    [change] = receive(parse_notification(json.dumps(body).encode()), [plan], store)
    assert change.proposal_id is not None
    return change.proposal_id


def _key(proposal_id: str, what: str) -> str:
    return f"declare.proposal.{proposal_id}.{what}"


def test_approving_a_proposal_starts_the_incident_with_the_alerts_start_as_detection(
    ui_env: UiEnv, proposal_env: Path, prefect_url: str, incident_deployment: str
) -> None:
    plan = load_plan(proposal_env)
    store = ui_env.store()
    starts_at = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=4)).replace(microsecond=0)
    alert_start = starts_at.isoformat().replace("+00:00", "Z")
    proposal_id = _notify(plan, store, "firing", alert_start)

    at = open_page("declare")
    page = shown(at)
    assert "Proposed incident on lab" in page and "PrimaryRegionDown" in page
    assert "use1 answers nothing" in page
    assert flow_runs(prefect_url, incident_deployment) == []  # held: nothing started

    at.text_input(key=_key(proposal_id, "operator")).input("dana")
    at.text_input(key=_key(proposal_id, "confirm")).input("lab")
    before = dt.datetime.now(dt.UTC)
    at.button(key=_key(proposal_id, "approve")).click().run()
    assert not at.exception, [e.value for e in at.exception]

    [run] = flow_runs(prefect_url, incident_deployment)
    params: dict[str, Any] = dict(run.parameters)
    assert dt.datetime.fromisoformat(params["detected_at"]) == starts_at
    assert params["proposal"] == proposal_id and params["operator"] == "dana"
    assert params["mode"] == "incident" and params["plan"] == str(proposal_env.resolve())
    assert dt.datetime.fromisoformat(params["declared_at"]) >= before  # T0 is the click
    approved = stored.get(store, proposal_id)
    assert approved is not None and approved.state == stored.APPROVED
    assert approved.flow_run_id == str(run.id) and approved.decided_by == "dana"
    assert at.query_params["flow_run"] == str(run.id)  # the page follows the incident
    with store.session() as s:
        [event] = s.query(AuditEvent).filter(AuditEvent.action == APPROVE_ACTION).all()
        assert event.accepted and event.who == "dana"

    # The flow run with those parameters: the incident records the alert's startsAt.
    from flows.drill import minimum_takeover_drill

    with pytest.raises(DrillError):  # the plan's sites do not answer: it stops at preflight
        minimum_takeover_drill(**params, tier_deadline_s=5)
    [incident] = store.list_runs(mode=Mode.INCIDENT)
    detection = incident.details.detection
    assert detection is not None and detection.detected_at == starts_at
    assert (detection.source, detection.proposal) == ("alert", proposal_id)
    declared = dt.datetime.fromisoformat(params["declared_at"])
    assert detection.detection_seconds == round((declared - starts_at).total_seconds(), 3)
    report = report_data(incident, store)
    assert report["detected_at"] == starts_at.isoformat()
    assert [m["moment"] for m in report["detection_chain"]] == [
        "detection", "declaration", "fence", "service restored", "DR carrying"
    ]  # fmt: skip
    assert report["detection_chain"][1]["since_previous_seconds"] == detection.detection_seconds


def test_a_withdrawn_proposal_is_shown_withdrawn_and_cannot_be_approved(
    ui_env: UiEnv, proposal_env: Path, prefect_url: str, incident_deployment: str
) -> None:
    plan = load_plan(proposal_env)
    store = ui_env.store()
    starts_at = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)).isoformat()
    proposal_id = _notify(plan, store, "firing", starts_at)
    assert _notify(plan, store, "resolved", starts_at) == proposal_id
    at = open_page("declare")
    at.query_params["proposal"] = proposal_id
    at.run()
    assert not any(b.key == _key(proposal_id, "approve") for b in at.button)
    assert "No alert proposes an incident now." in shown(at)
    assert "The proposal linked here is **withdrawn**" in shown(at)
    assert flow_runs(prefect_url, incident_deployment) == []


def test_an_incident_at_dr_shows_its_detection_and_its_gates_as_they_stood(
    ui_env: UiEnv, proposal_env: Path
) -> None:
    ui_env.set("DRILLS_UI_LAB", "0")  # a reader: the way back is not checked live for one
    t0 = dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)
    gates = [
        {"kind": "window", "name": "year-end freeze", "state": "blocking",
         "detail": "inside it until 2026-12-27T00:00+00:00", "until": None},
        {"kind": "alert", "name": 'alertname="DiskFull"', "state": "unverified",
         "detail": "Alertmanager at http://am:9093 did not answer", "until": None},
    ]  # fmt: skip
    details = RunDetails(
        gates=gates,
        detection=DetectionRecord(detected_at=t0 - dt.timedelta(seconds=95), source="alert",
                                  detection_seconds=95.0, proposal="p1"),
    )  # fmt: skip
    ui_env.store().create_run(
        DrillRun(
            id="inc-at-dr", plan="lab", plan_digest="0" * 64, mode=Mode.INCIDENT, dry_run=False,
            operator="dana", status="succeeded", started_at=t0, t0=t0,
            restored_at=t0 + dt.timedelta(minutes=2), finished_at=t0 + dt.timedelta(minutes=3),
            details=details,
        )
    )  # fmt: skip
    at = open_page("declare")
    page = shown(at)
    assert "lab: serving from DR" in page
    assert (
        "Gates at the start" in page and "(the alert's startsAt); declared 1 min 35 s later" in page
    )
    [table] = [d for d in at.dataframe if "gate" in d.value.columns]
    rows = table.value.to_dict("records")
    assert [(r["gate"], r["state"]) for r in rows] == [
        ("window year-end freeze", "blocking"), ('alert alertname="DiskFull"', "unverified")
    ]  # fmt: skip
