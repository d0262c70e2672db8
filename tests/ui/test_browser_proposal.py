"""An alert's proposed incident approved in a real browser (system Chromium, Playwright,
`drills ui` on loopback): the notification's link opens the Incident page on it, the
operator approves it, the real flow runs, and the incident records detected_at equal to
the alert's startsAt. The plan's sites do not answer, so the incident stops at its
preflight and no lab is touched."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from pathlib import Path

import pytest
import yaml

from drills.plan import load_plan
from drills.store.history import HistoryStore
from drills.store.kinds import Mode
from drills.store.models import DrillRun
from drills.takeover.proposals import parse_notification, receive
from tests.support.browser import CHROMIUM_ARGS, dashboard, serving_incident_flow
from tests.support.drill import offline_lab_plan_data
from tests.support.services import require_system_binary
from ui.proposals import APPROVE_BUTTON

pytestmark = pytest.mark.slow


def _incident(store: HistoryStore, runner_log: Path) -> DrillRun:
    deadline = time.monotonic() + 240  # a flow run imports the flow afresh: slow on a busy host
    while time.monotonic() < deadline:
        runs = store.list_runs(mode=Mode.INCIDENT)
        if runs and runs[0].finished_at is not None:
            return runs[0]
        time.sleep(0.5)
    tail = "\n".join(runner_log.read_text(errors="replace").splitlines()[-30:])
    raise AssertionError(f"the approved incident never ended in the history:\n{tail}")


@pytest.mark.timeout(600)
def test_approve_a_proposed_incident_in_chromium(prefect_url: str, tmp_path: Path) -> None:
    chromium = require_system_binary("chromium", "chromium")
    from playwright.sync_api import expect, sync_playwright

    data = offline_lab_plan_data()
    data["declare_on"] = ['alertname="PrimaryRegionDown"']
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(yaml.safe_dump(data, sort_keys=False))
    db_url = f"sqlite:///{tmp_path / 'history.db'}"
    store = HistoryStore(db_url)
    starts_at = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=6)).replace(microsecond=0)
    body = {"version": "4", "groupKey": "{}:{}", "status": "firing", "alerts": [
        {"status": "firing", "labels": {"alertname": "PrimaryRegionDown"}, "annotations": {},
         "startsAt": starts_at.isoformat(), "endsAt": "0001-01-01T00:00:00Z",
         "fingerprint": "aa11bb22cc33dd44"}]}  # fmt: skip
    [change] = receive(parse_notification(json.dumps(body).encode()), [load_plan(plan_path)], store)
    with (
        serving_incident_flow(prefect_url, "ui-browser-proposal", {"DRILLS_DB_URL": db_url},
                              tmp_path / "runner.log") as deployment,
        dashboard({"DRILLS_DB_URL": db_url, "DRILLS_PLANS": str(plan_path),
                   "PREFECT_API_URL": prefect_url, "DRILLS_INCIDENT_DEPLOYMENT": deployment},
                  tmp_path / "ui.log", cwd=tmp_path) as base,
        sync_playwright() as pw,
    ):  # fmt: skip
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        expect.set_options(timeout=30_000)
        page.goto(f"{base}/declare?proposal={change.proposal_id}")  # the notification's link
        expect(page.get_by_role("heading", name="Proposed incident on lab")).to_be_visible()
        expect(page.get_by_text("PrimaryRegionDown").first).to_be_visible()
        # Type only once the whole page is drawn (the audit log is its last element), as a
        # person reads it first: in one loaded run, the approval reached the page without the
        # confirmation typed into the proposal's box, and was refused, as it must be.
        expect(page.get_by_text(re.compile("^Audit log: the last"))).to_be_visible()
        confirm = page.get_by_label(re.compile("Type the plan name")).first  # the proposal's
        confirm.fill("lab")
        confirm.press("Tab")
        expect(confirm).to_have_value("lab")
        page.get_by_role("button", name=APPROVE_BUTTON).click()
        expect(page.get_by_text(re.compile(r"^Incident run ")).first).to_be_visible()
        page.screenshot(path=str(tmp_path / "proposal-approved.png"), full_page=True)
        browser.close()
        incident = _incident(store, tmp_path / "runner.log")  # the runner still serves
    detection = incident.details.detection
    assert detection is not None and detection.detected_at == starts_at
    assert detection.proposal == change.proposal_id
