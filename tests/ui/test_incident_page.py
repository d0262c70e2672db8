"""The way home on the dashboard, in AppTest: the banner every page shows while a plan serves
from DR, the incident page's way-back readiness and its Fail back action (operators only,
confirmed, refused exactly as the CLI refuses, audited), the same request from the terminal
(`drills serve run failback`), and the history's incident record linking a takeover to its
failback both ways."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from drills.launch.takeovers import PrefectLauncher
from drills.orchestrator.rest import PrefectRest
from drills.passwords import hash_password
from drills.store.details import IncidentLink, RunDetails
from drills.store.history import HistoryStore
from drills.store.models import AuditEvent
from drills.takeover.failback_request import FailbackRequest, request_failback
from drills.takeover.incident import IncidentRequest, declare_incident
from tests.support.ui import (
    APP,
    FLOW_NAME,
    Drilled,
    UiEnv,
    add_run,
    delete_flow_runs,
    flow_runs,
    open_page,
    shown,
)
from ui import data as ui_data

FAILBACK_BUTTON = "Fail back"


def at_dr(store: HistoryStore, plan: str = "lab", *, now: dt.datetime | None = None) -> str:
    """An incident that took the plan over two hours ago: it serves from DR since."""
    # From the time of the test, not of the module's import: a long suite runs it half an
    # hour later, and "2 h ago" would read "3 h ago".
    started = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(hours=2)
    run = add_run(store, plan=plan, mode="incident", started_at=started, rto_seconds=40.0)
    store.update_run(run, restored_at=started + dt.timedelta(seconds=40))
    return run


def failed_back(
    store: HistoryStore, incident: str, plan: str = "lab", *, now: dt.datetime | None = None
) -> str:
    """A failback that closed ``incident``, linked both ways as a real one links them."""
    started = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(minutes=30)
    run = add_run(store, plan=plan, mode="failback", started_at=started, rto_seconds=8.0)
    store.update_run(
        run,
        restored_at=started + dt.timedelta(seconds=8),
        details=RunDetails(incident=IncidentLink(incident_run=incident)),
    )
    closed = IncidentLink(
        failback_run=run, closed_at=started + dt.timedelta(seconds=20), closed_by="failback"
    )
    store.update_run(incident, details=RunDetails(incident=closed))
    return run


def banners(at: AppTest) -> list[str]:
    return [str(e.value) for e in at.error if "serves from DR" in str(e.value)]


# --- the banner ------------------------------------------------------------------------


def test_every_page_shows_one_banner_while_a_plan_serves_from_dr(ui_env: UiEnv) -> None:
    store = ui_env.store()
    incident = at_dr(store)
    add_run(store, plan="other", mode="drill")  # a drill ends where it started: no banner
    for page in (None, "history", "plans", "declare"):
        at = open_page(page)
        [banner] = banners(at)
        assert banner.startswith("**lab serves from DR** since ") and "(2 h ago)" in banner
        assert f"incident `{incident}`" in banner
        links = [link.value for link in at.page_link]
        assert "The incident: the way back and Fail back" in links


def test_no_banner_while_every_plan_serves_from_its_primary(ui_env: UiEnv) -> None:
    store = ui_env.store()
    add_run(store, mode="drill")
    failed_back(store, at_dr(store))  # closed: back at the primary
    for page in (None, "declare"):
        at = open_page(page)
        assert banners(at) == [], shown(at)
        assert "The incident: the way back and Fail back" not in [x.value for x in at.page_link]


# --- the history links an incident and its failback ---------------------------------------


def _history_of(run_id: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params["run"] = run_id
    return open_page("history", at=at)


def test_the_history_links_an_incident_to_its_failback_both_ways(ui_env: UiEnv) -> None:
    store = ui_env.store()
    now = dt.datetime.now(dt.UTC)  # one clock for both: the time served from DR is exact
    incident = at_dr(store, now=now)
    failback = failed_back(store, incident, now=now)
    at = _history_of(incident)
    page = shown(at)
    assert "**Incident record** — closed" in page
    assert "| failed back |" in page and "| closed |" in page
    assert "**Served from DR:** 1 h 29 min" in page, page  # failed back − taken over
    [link] = [x for x in at.page_link if x.value.startswith("Failed back by run")]
    assert link.proto.query_string == f"run={failback}"
    at = _history_of(failback)
    [link] = [x for x in at.page_link if x.value.startswith("Its incident: run")]
    assert link.proto.query_string == f"run={incident}"
    assert "**Incident record** — closed" in shown(at)
    # A failback's header gives its downtime, never an RTO against a target it has not.
    labels = [m.label for m in at.metric]
    assert "Downtime" in labels and "RTO" not in labels, labels


def test_an_open_incident_says_it_is_still_served_from_dr(ui_env: UiEnv) -> None:
    at = _history_of(at_dr(ui_env.store()))
    assert "**Incident record** — open: still served from DR" in shown(at)
    assert not [x for x in at.page_link if x.value.startswith("Failed back by run")]


# --- Fail back on the incident page ----------------------------------------------------------


@pytest.fixture(scope="session")
def failback_deployment(prefect_url: str) -> str:
    """A deployment of the real flow for failbacks on the test server, nobody serving it."""
    from flows.drill import minimum_takeover_drill

    name = "ui-apptest-failback"
    deployment: Any = minimum_takeover_drill.to_deployment(name=name)
    deployment.apply()
    return f"{FLOW_NAME}/{name}"


@pytest.fixture()
def failback_env(
    populated: Drilled, ui_env: UiEnv, prefect_url: str, incident_deployment: str,
    failback_deployment: str,
) -> Iterator[UiEnv]:  # fmt: skip
    """The lab's plan serving from DR by the history, the Prefect test server with both
    deployments, and the failback's flow runs emptied after."""
    ui_env.set("PREFECT_API_URL", prefect_url)
    ui_env.set("DRILLS_INCIDENT_DEPLOYMENT", incident_deployment)
    ui_env.set("DRILLS_FAILBACK_DEPLOYMENT", failback_deployment)
    delete_flow_runs(prefect_url, failback_deployment)
    yield ui_env
    delete_flow_runs(prefect_url, failback_deployment)


def _audit(env: UiEnv) -> list[AuditEvent]:
    with env.store().session() as s:
        return [e for e in s.query(AuditEvent).order_by(AuditEvent.id) if e.action == "fail-back"]


def _fill(at: AppTest, *, reason: str, confirmation: str) -> AppTest:
    at.text_input(key="declare.fb.lab.operator").input("dave")
    at.text_area(key="declare.fb.lab.reason").input(reason)
    at.text_input(key="declare.fb.lab.confirm").input(confirmation)
    return at


def _press(at: AppTest) -> AppTest:
    found = next((b for b in at.button if b.label == FAILBACK_BUTTON), None)
    assert found is not None, shown(at)
    return found.click().run()


def test_the_incident_page_shows_the_way_back_but_fail_back_is_for_operators(
    failback_env: UiEnv, prefect_url: str, failback_deployment: str
) -> None:
    failback_env.set("DRILLS_UI_OPERATOR_PASSWORD_HASH", hash_password("not typed here"))
    at_dr(failback_env.store())
    at = open_page("declare")
    page = shown(at)
    assert "lab: serving from DR" in page
    assert "Readiness for the way back (DR → primary)" in page
    # Its checks probe both sites: public read shows that they exist, and runs none.
    assert "The way back is checked live against both sites, for the operator role only" in page
    assert "`data.caught_up` ran in" not in page and "`fence.writers_stopped` ran in" not in page
    assert "Check the way back again" not in [b.label for b in at.button]
    assert FAILBACK_BUTTON not in [b.label for b in at.button]
    [warning] = [w.value for w in at.warning if "You may not" in w.value]
    assert warning.startswith("You may not declare an incident or fail back: sign in")
    assert flow_runs(prefect_url, failback_deployment) == []
    assert _audit(failback_env) == []


def test_fail_back_is_refused_once_the_plan_no_longer_serves_from_dr(
    failback_env: UiEnv, prefect_url: str, failback_deployment: str
) -> None:
    """The page offered it while at DR; by the click another failback had closed the
    incident: refused as `drills run --mode failback` refuses, and audited."""
    failback_env.set("DRILLS_UI_LAB", "1")
    store = failback_env.store()
    incident = at_dr(store)
    at = _fill(open_page("declare"), reason="primary back", confirmation="lab")
    shown_at_dr = ui_data.serving_from_dr(failback_env.db_url)
    failed_back(store, incident)
    # The page as it was shown, however long the click takes on a loaded machine: were its
    # 5 s cache to expire first, the form would be gone and the click with it.
    failback_env.monkeypatch.setattr(ui_data, "serving_from_dr", lambda db_url: shown_at_dr)
    at = _press(at)
    assert not at.exception, [e.value for e in at.exception]
    [error] = [e.value for e in at.error if "Failback" in e.value]
    assert error == (
        "Failback **not** started — refused: plan lab does not serve from DR (it serves from "
        "primary): a failback only brings production home after an incident; see "
        "`drills status`"
    )
    assert flow_runs(prefect_url, failback_deployment) == []
    [event] = _audit(failback_env)
    assert (event.who, event.plan, event.accepted, event.reason) == (
        "dave", "lab", False, "primary back"
    )  # fmt: skip


def test_a_wrong_confirmation_is_refused_and_a_right_one_starts_the_failback(
    failback_env: UiEnv, prefect_url: str, failback_deployment: str, populated: Drilled
) -> None:
    failback_env.set("DRILLS_UI_LAB", "1")
    incident = at_dr(failback_env.store())
    at = open_page("declare")
    # Whoever may act sees the way back checked live, and the audit log says who ran it.
    assert "`data.caught_up` ran in" in shown(at) and "`fence.writers_stopped` ran in" in shown(at)
    # Every summary names the site production is going home to.
    [images] = [x.label for x in at.expander if "Every image in the primary registry" in x.label]
    assert "at the primary with DR's digest" in images and "at DR" not in images, images
    with failback_env.store().session() as s:
        [checked] = [e for e in s.query(AuditEvent) if e.action == "check-way-back"]
        assert (checked.who, checked.plan, checked.accepted) == (
            "anonymous (lab mode)", "lab", True
        )  # fmt: skip
    at = _press(_fill(at, reason="primary back", confirmation="lab2"))
    assert any("the confirmation does not match the plan name 'lab'" in e.value for e in at.error)
    at = _press(_fill(at, reason="primary back", confirmation="lab"))
    assert not at.exception, [e.value for e in at.exception]
    [run] = flow_runs(prefect_url, failback_deployment)
    assert run.parameters == {
        "plan": populated.plan_path, "mode": "failback", "operator": "dave",
        "reason": "primary back",
    }  # fmt: skip
    assert "failback" in run.tags
    assert at.query_params["flow_run"] == str(run.id)
    assert f"Failback run {run.name}" in shown(at)
    refused, accepted = _audit(failback_env)
    assert not refused.accepted and accepted.accepted
    assert accepted.detail["incident_run"] == incident
    assert accepted.detail["flow_run_id"] == str(run.id)


def test_a_run_in_the_way_refuses_the_failback(
    failback_env: UiEnv, prefect_url: str, failback_deployment: str, populated: Drilled
) -> None:
    """The core the page and the CLI share: a failback already scheduled, then any run of
    the plan still going, refuse another; each request audited."""
    store = failback_env.store()
    at_dr(store)
    request = FailbackRequest(
        plan_path=populated.plan_path, plan_name="lab", operator="erin", reason="home",
        confirmation="lab", requested_at=dt.datetime.now(dt.UTC),
    )  # fmt: skip
    with PrefectRest(prefect_url) as api:
        launcher = PrefectLauncher(api, failback_deployment, tags=("failback",))
        first = request_failback(request, store, launcher)
        assert first.accepted, first.message
        again = request_failback(request, store, launcher)
        assert not again.accepted
        assert again.message.startswith("refused: a run on lab is in the way: ")
        assert [r.id for r in again.blocking] == [first.flow_run_id]
        delete_flow_runs(prefect_url, failback_deployment)
        # A drill started from a terminal, never finished: nobody can tell it stopped.
        going = add_run(store, mode="drill", status="running", finished=False)
        held = request_failback(request, store, launcher)
    assert (
        not held.accepted
        and held.message == f"refused: a run on lab is in the way: {going} (running)"
    )
    assert [e.accepted for e in _audit(failback_env)] == [True, False, False]


def test_fail_back_from_the_terminal_takes_the_same_path(
    failback_env: UiEnv, prefect_url: str, failback_deployment: str, populated: Drilled
) -> None:
    """`drills serve run failback` asks through request_failback: refused while the plan
    serves from its primary (exit 1, the page's words), started once it serves from DR."""

    def fail_back() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable, "-m", "drills", "serve", "run", failback_deployment,
                "--no-wait", "--api-url", prefect_url, "--db", failback_env.db_url,
                "--state-dir", str(failback_env.tmp_path / "no-local-server"),
                "-p", f"plan={populated.plan_path}", "-p", "mode=failback",
                "--operator", "frank", "--reason", "from the terminal", "--confirm", "lab",
            ],
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    refused = fail_back()
    assert refused.returncode == 1, refused.stderr
    assert "Failback not started: refused: plan lab does not serve from DR" in refused.stderr
    assert flow_runs(prefect_url, failback_deployment) == []
    at_dr(failback_env.store())
    started = fail_back()
    assert started.returncode == 0, started.stderr
    assert "Failback of lab started by frank." in started.stderr
    [run] = flow_runs(prefect_url, failback_deployment)
    assert run.parameters["operator"] == "frank" and run.parameters["mode"] == "failback"
    assert [(e.who, e.accepted) for e in _audit(failback_env)] == [
        ("frank", False), ("frank", True)
    ]  # fmt: skip


def test_a_second_declaration_is_refused_while_the_plan_serves_from_dr(
    failback_env: UiEnv, prefect_url: str, incident_deployment: str, populated: Drilled
) -> None:
    """The page offers no Declare for a plan at DR, and the core the terminal shares refuses
    it too: a takeover starts from the primary. Nothing starts; the refusal is audited."""
    store = failback_env.store()
    incident = at_dr(store)
    request = IncidentRequest(
        plan_path=populated.plan_path, plan_name="lab", operator="erin", reason="again",
        confirmation="lab", declared_at=dt.datetime.now(dt.UTC),
    )  # fmt: skip
    with PrefectRest(prefect_url) as api:
        declared = declare_incident(request, store, PrefectLauncher(api, incident_deployment))
    assert not declared.accepted
    assert declared.message.startswith(
        f"refused: plan lab already serves from DR (incident {incident})"
    )
    assert flow_runs(prefect_url, incident_deployment) == []
    with store.session() as s:
        [event] = [e for e in s.query(AuditEvent) if e.action == "declare-incident"]
    assert not event.accepted
