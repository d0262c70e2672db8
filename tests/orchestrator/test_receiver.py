"""Detection to declaration against a real Alertmanager (Debian's) posting to the real
receiver (`drills serve receiver`, its own process): an alert matching the plan's
declare_on proposes one incident, however often it is sent again or grouped, announced
with a link to the Incident page; its resolution withdraws the proposal nobody approved;
a request without the token is refused (401) and audited, the token never recorded."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import yaml
from pydantic import ValidationError
from sqlalchemy import select

from drills.errors import PlanError
from drills.plan import load_plan
from drills.plan.models.drill_gates import selector_matches
from drills.store import proposals as stored
from drills.store.history import HistoryStore
from drills.store.models import AuditEvent
from drills.takeover.proposals import PROPOSE_ACTION, WITHDRAW_ACTION
from drills_lab.procs import free_port
from tests.support.alertmanager import RunningAlertmanager, alertmanager, webhook_config
from tests.support.drill import offline_lab_plan_data, serving
from tests.support.receivers import JsonReceiver, json_receiver

TOKEN = "receiver-token-0f3a9c"  # a test's own: shows if it leaks into the store
DECLARE_ON = 'alertname=~"PrimaryDown.*", severity="page"'
T = TypeVar("T")


@dataclass(frozen=True)
class Stack:
    am: RunningAlertmanager
    url: str  # the receiver's /alertmanager
    history: HistoryStore
    told: JsonReceiver


def _wait(what: str, probe: Callable[[], T | None], timeout: float = 30.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"never saw {what}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("receiver")
    data = offline_lab_plan_data()
    data["declare_on"] = [DECLARE_ON]
    plan_path = tmp / "plan.yaml"
    plan_path.write_text(yaml.safe_dump(data, sort_keys=False))
    db = f"sqlite:///{tmp / 'history.db'}"
    history = HistoryStore(db)
    port = free_port()
    url = f"http://127.0.0.1:{port}/alertmanager"
    with json_receiver() as told:
        env = {**os.environ, "TEST_RECEIVER_TOKEN": TOKEN, "DRILLS_NOTIFY": told.url(),
               "DRILLS_UI_URL": "http://dashboard.example"}  # fmt: skip
        argv = [sys.executable, "-m", "drills", "serve", "receiver", "--port", str(port),
                "--token", "env:TEST_RECEIVER_TOKEN", "--plans", str(plan_path),
                "--db", db]  # fmt: skip
        log = (tmp / "receiver.log").open("wb")
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=log)
        try:
            _wait("the receiver answer", lambda: serving(f"http://127.0.0.1:{port}/healthz"))
            with alertmanager(tmp, webhook_config(url, TOKEN)) as am:
                yield Stack(am, url, history, told)
        finally:
            process.terminate()
            process.wait(10)
            log.close()
            history.close()


def _audit(history: HistoryStore, action: str) -> list[AuditEvent]:
    with history.session() as s:
        query = select(AuditEvent).where(AuditEvent.action == action).order_by(AuditEvent.id)
        return list(s.scalars(query).all())


def _proposals_with(history: HistoryStore, alertname: str) -> list[stored.Proposal]:
    every = stored.listing(history, (stored.PENDING, *stored.DECIDED_STATES), 100)
    return [p for p in every if any(a["alertname"] == alertname for a in p.alerts)]


def _at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).astimezone(dt.UTC)


def test_declare_on_matches_as_alertmanager_does() -> None:
    labels = {"alertname": "PrimaryDownUSE1", "severity": "page"}
    assert selector_matches(DECLARE_ON, labels)
    assert not selector_matches(DECLARE_ON, {**labels, "severity": "pager"})  # anchored
    assert not selector_matches(DECLARE_ON, {"alertname": "PrimaryDown"})  # missing is ""
    assert selector_matches('team!="ml", alertname!~"Disk.*"', {"alertname": "Primary"})
    assert not selector_matches('team!="ml"', {"team": "ml"})
    assert selector_matches(r'msg="say \"hi\""', {"msg": 'say "hi"'})


def test_an_alert_proposes_one_incident_and_its_resolution_withdraws_it(stack: Stack) -> None:
    started = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(minutes=3)
    first = {"alertname": "PrimaryDownA", "severity": "page", "region": "use1"}
    starts_at = stack.am.fire(first, starts_at=started)
    [proposal] = _wait("a proposal", lambda: _proposals_with(stack.history, "PrimaryDownA"))
    assert proposal.plan == "lab" and proposal.state == stored.PENDING
    assert proposal.detected_at == _at(starts_at)
    assert proposal.alerts[0]["labels"]["region"] == "use1"

    # A second alert of the same group joins it; Alertmanager repeats the group every 2 s.
    second = {**first, "region": "use1b"}
    later = stack.am.fire(second, starts_at=started + dt.timedelta(seconds=30))
    _wait("the second alert join", lambda: len(stored.get(stack.history, proposal.id).alerts) == 2)
    stack.am.fire({**first, "alertname": "PrimaryDownA", "severity": "warning"}, starts_at=started)
    time.sleep(5)  # repeats, and the group notified with the alert that does not match
    [again] = _proposals_with(stack.history, "PrimaryDownA")
    assert again.id == proposal.id and len(again.alerts) == 2
    assert again.detected_at == _at(starts_at)  # the earliest startsAt of its alerts

    proposed = [e for e in _audit(stack.history, PROPOSE_ACTION)
                if e.detail["proposal_id"] == proposal.id]  # fmt: skip
    assert len(proposed) == 1 and proposed[0].who == "alertmanager"
    messages = [m for m in stack.told.messages() if proposal.id in m["message"]]
    assert len(messages) == 1, messages  # announced once, however often it was sent
    assert "incident proposed by alert PrimaryDownA" in messages[0]["title"]
    assert f"http://dashboard.example/declare?proposal={proposal.id}" in messages[0]["message"]

    stack.am.resolve(first, starts_at)
    time.sleep(3)  # one of two resolved: still proposed
    assert stored.get(stack.history, proposal.id).state == stored.PENDING
    stack.am.resolve(second, later)
    withdrawn = _wait(
        "the withdrawal", lambda: _state(stack.history, proposal.id, stored.WITHDRAWN)
    )
    assert withdrawn.decided_by == "alertmanager" and "resolved" in withdrawn.outcome
    assert {a["status"] for a in withdrawn.alerts} == {stored.RESOLVED}
    # The receiver audits the withdrawal just after it stores it, in a write of its own.
    [event] = _wait("the withdrawal's audit", lambda: [
        e for e in _audit(stack.history, WITHDRAW_ACTION) if e.detail["proposal_id"] == proposal.id
    ])  # fmt: skip
    assert event.accepted and event.plan == "lab"


def _state(history: HistoryStore, proposal_id: str, state: str) -> stored.Proposal | None:
    found = stored.get(history, proposal_id)
    return found if found is not None and found.state == state else None


def _notification(alertname: str) -> dict[str, Any]:
    return {
        "version": "4", "groupKey": '{}:{alertname="X"}', "status": "firing",
        "receiver": "drills", "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
        "externalURL": "http://am", "truncatedAlerts": 0,
        "alerts": [{"status": "firing", "labels": {"alertname": alertname, "severity": "page"},
                    "annotations": {}, "startsAt": "2026-12-02T07:00:00Z",
                    "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "",
                    "fingerprint": "0123456789abcdef"}],
    }  # fmt: skip


def test_a_request_without_the_token_is_refused_and_audited(stack: Stack) -> None:
    body = _notification("PrimaryDownForged")
    without = httpx.post(stack.url, json=body, timeout=5)
    wrong = httpx.post(stack.url, json=body, timeout=5,
                       headers={"Authorization": "Bearer not-the-token"})  # fmt: skip
    assert (without.status_code, wrong.status_code) == (401, 401)
    assert without.headers["WWW-Authenticate"].startswith("Bearer")
    assert _proposals_with(stack.history, "PrimaryDownForged") == []
    refused = _audit(stack.history, "alert-webhook")
    reasons = [e.reason for e in refused]
    assert "no bearer token" in reasons and "wrong bearer token" in reasons
    assert all(not e.accepted and e.who == "address:127.0.0.1" for e in refused)
    kept = json.dumps([[e.reason, e.detail] for e in refused])
    assert "not-the-token" not in kept and TOKEN not in kept

    bad = httpx.post(stack.url, json={**body, "version": "3"}, timeout=5,
                     headers={"Authorization": f"Bearer {TOKEN}"})  # fmt: skip
    assert bad.status_code == 400 and "version" in bad.json()["error"]
    token = {"Authorization": f"Bearer {TOKEN}"}
    good = httpx.post(stack.url, json=body, timeout=5, headers=token)
    assert good.status_code == 200 and good.json()["changes"][0]["change"] == "proposed"
    body["alerts"][0]["status"] = "resolved"  # leave no proposal pending for the other tests
    gone = httpx.post(stack.url, json=body, timeout=5, headers=token)
    assert gone.json()["changes"][0]["change"] == "withdrawn"


def test_declare_on_with_a_regex_that_does_not_compile_is_a_bad_plan(tmp_path: Path) -> None:
    data = offline_lab_plan_data()
    data["declare_on"] = ['alertname=~"(unclosed"']
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises((PlanError, ValidationError), match="does not compile"):
        load_plan(path)
