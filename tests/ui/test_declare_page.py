"""Declare incident in AppTest, against the session's Prefect test server: who sees the
button, what a wrong confirmation does, the real flow run a right one creates, and a
declaration from the terminal (`drills serve run declare-incident`) taking the same path."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from drills.launch.takeovers import PrefectLauncher
from drills.orchestrator.flow_runs import cancel_flow_run
from drills.orchestrator.rest import PrefectRest
from drills.passwords import hash_password
from drills.store.details import IncidentLink, RunDetails
from drills.store.models import AuditEvent
from drills.takeover.incident import IncidentRequest, declare_incident
from tests.support.ui import (
    APP,
    DECLARE_BUTTON,
    Drilled,
    UiEnv,
    add_run,
    button,
    declare,
    delete_flow_runs,
    fill_declaration,
    flow_runs,
    open_page,
    shown,
)

PASSWORD = "correct horse battery staple"


@pytest.fixture()
def declare_env(
    populated: Drilled, ui_env: UiEnv, prefect_url: str, incident_deployment: str
) -> Iterator[UiEnv]:
    """The lab's plan, the Prefect test server, and its incident deployment, emptied after."""
    ui_env.set("PREFECT_API_URL", prefect_url)
    ui_env.set("DRILLS_INCIDENT_DEPLOYMENT", incident_deployment)
    delete_flow_runs(prefect_url, incident_deployment)
    yield ui_env
    delete_flow_runs(prefect_url, incident_deployment)


@dataclass(frozen=True)
class Server:
    """The Prefect test server, its incident deployment, and a client of it."""

    url: str
    deployment: str
    api: PrefectRest


@pytest.fixture()
def server(prefect_url: str, incident_deployment: str) -> Iterator[Server]:
    with PrefectRest(prefect_url) as api:
        yield Server(prefect_url, incident_deployment, api)


def _audit(env: UiEnv) -> list[AuditEvent]:
    with env.store().session() as s:
        return list(s.query(AuditEvent).order_by(AuditEvent.id).all())


def test_wrong_confirmation_is_refused_and_audited(
    declare_env: UiEnv, prefect_url: str, incident_deployment: str
) -> None:
    declare_env.set("DRILLS_UI_LAB", "1")
    at = open_page("declare")
    assert "Lab mode" in " ".join(w.value for w in at.warning)
    declare(fill_declaration(at, operator="carol", reason="primary region down",
                             confirmation="lab2"))  # fmt: skip
    assert any("Incident **not** declared" in e.value for e in at.error)
    assert "confirmation does not match the plan name 'lab'" in shown(at)
    assert flow_runs(prefect_url, incident_deployment) == []
    [event] = _audit(declare_env)
    assert (event.who, event.plan, event.accepted) == ("carol", "lab", False)
    assert event.reason == "primary region down" and event.action == "declare-incident"
    assert "confirmation does not match" in event.detail["outcome"]


def test_correct_confirmation_starts_a_real_flow_run_once(
    declare_env: UiEnv, populated: Drilled, prefect_url: str, incident_deployment: str
) -> None:
    declare_env.set("DRILLS_UI_LAB", "1")
    at = open_page("declare")
    fill_declaration(
        at, operator="carol", reason="primary region down", confirmation="lab", force=True
    )
    at.run()
    assert any("split brain" in w.value for w in at.warning)  # force-unfenced warns
    before = dt.datetime.now(dt.UTC)
    declare(at)
    after = dt.datetime.now(dt.UTC)
    assert not at.exception
    [run] = flow_runs(prefect_url, incident_deployment)
    params = run.parameters
    assert params["plan"] == populated.plan_path and params["mode"] == "incident"
    assert (params["operator"], params["reason"]) == ("carol", "primary region down")
    assert params["force_unfenced"] is True
    assert before <= dt.datetime.fromisoformat(params["declared_at"]) <= after  # T0 = click
    assert run.state is not None and run.state.type.value == "SCHEDULED"  # nobody serves it
    # The page follows the run, links to Prefect, and keeps the link in the URL.
    assert at.query_params["flow_run"] == str(run.id)
    assert f"Incident run {run.name}" in shown(at)
    [link] = at.get("link_button")
    assert link.proto.url == f"{prefect_url.removesuffix('/api')}/runs/flow-run/{run.id}"
    assert "waiting for a worker" in shown(at)
    [accepted] = _audit(declare_env)
    assert accepted.accepted and accepted.detail["flow_run_id"] == str(run.id)
    assert accepted.detail["force_unfenced"] is True
    # A second declaration on the same plan is refused while the first is going.
    fresh = open_page("declare")
    declare(fill_declaration(fresh, operator="dave", reason="again", confirmation="lab"))
    assert "already running" in " ".join(e.value for e in fresh.error)
    assert len(flow_runs(prefect_url, incident_deployment)) == 1
    second = _audit(declare_env)[-1]
    assert (second.who, second.accepted) == ("dave", False)
    assert second.detail["blocking"] == [str(run.id)]


def test_without_access_configured_nobody_gets_the_button(declare_env: UiEnv) -> None:
    at = open_page("declare")
    assert button(at, DECLARE_BUTTON) is None
    assert "nobody may declare" in " ".join(w.value for w in at.warning)
    assert not at.text_input and not at.text_area


def test_operator_password_sign_in(declare_env: UiEnv) -> None:
    declare_env.set("DRILLS_UI_OPERATOR_PASSWORD_HASH", hash_password(PASSWORD))
    declare_env.set("DRILLS_UI_LAB", "1")  # a configured password wins over lab mode
    at = open_page("declare")
    assert button(at, DECLARE_BUTTON) is None
    assert "Lab mode" not in shown(at)
    at.text_input(key="declare.sign_in.name").input("erin")
    at.text_input(key="declare.sign_in.secret").input("not the password")
    at.form_submit_button[0].click().run()
    assert "wrong password" in " ".join(e.value for e in at.error)
    assert button(at, DECLARE_BUTTON) is None
    at.text_input(key="declare.sign_in.secret").input(PASSWORD)
    at.form_submit_button[0].click().run()
    assert button(at, DECLARE_BUTTON) is not None
    assert "Declaring as **erin**" in shown(at)
    assert PASSWORD not in shown(at)


def _oidc_app(email: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.secrets["auth"] = {
        "redirect_uri": "http://127.0.0.1:8501/oauth2callback",
        "cookie_secret": "test-cookie-secret",
        "client_id": "drills",
        "client_secret": "test-client-secret",
        "server_metadata_url": "http://127.0.0.1:9/.well-known/openid-configuration",
    }
    at.user = {"is_logged_in": True, "email": email, "groups": ["sre"]}
    return at


def test_oidc_user_off_the_allow_list_sees_no_button(declare_env: UiEnv) -> None:
    declare_env.set("DRILLS_UI_OPERATORS", "alice@example.com")
    at = open_page("declare", at=_oidc_app("eve@example.com"))
    assert button(at, DECLARE_BUTTON) is None
    assert "eve@example.com is not on the operator allow-list" in shown(at)
    allowed = open_page("declare", at=_oidc_app("Alice@example.com"))
    assert button(allowed, DECLARE_BUTTON) is not None
    assert "Declaring as **Alice@example.com**" in shown(allowed)


def test_oidc_groups_allow_list(declare_env: UiEnv) -> None:
    declare_env.set("DRILLS_UI_OPERATOR_GROUPS", "sre, oncall")
    at = open_page("declare", at=_oidc_app("frank@example.com"))
    assert button(at, DECLARE_BUTTON) is not None


def test_closed_read_pages_need_a_sign_in(ui_env: UiEnv, tmp_path: Path) -> None:
    ui_env.set("DRILLS_UI_PUBLIC_READ", "0")
    ui_env.set("DRILLS_UI_OPERATOR_PASSWORD_HASH", hash_password(PASSWORD))
    at = open_page()
    assert "signed-in users only" in shown(at)
    assert "Fleet" not in [t.value for t in at.title]
    at.text_input(key="app.sign_in.name").input("gina")
    at.text_input(key="app.sign_in.secret").input(PASSWORD)
    at.form_submit_button[0].click().run()
    assert [t.value for t in at.title] == ["Fleet"]  # the default page
    assert "Signed in as **gina**" in shown(at)


def test_a_crashed_incident_blocks_the_next_one_until_recovered(
    declare_env: UiEnv, populated: Drilled, server: Server
) -> None:
    """A run whose flow run crashed never writes finished_at: Prefect knows it is over, but
    what it changed waits for a decision, and a new run would refuse to start on top of it."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.states import Crashed

    with temporary_settings({PREFECT_API_URL: server.url}), get_client(sync_client=True) as c:
        deployment = c.read_deployment_by_name(server.deployment)
        crashed = c.create_flow_run_from_deployment(deployment.id, parameters={"plan": "x"})
        c.set_flow_run_state(crashed.id, Crashed(), force=True)
    store = declare_env.store()
    # Newer than any drill of the session's store (a drill after an incident means it was
    # failed back by hand).
    now = dt.datetime.now(dt.UTC)
    stale = add_run(store, mode="incident", status="running", finished=False,
                    flow_run_id=str(crashed.id), started_at=now)  # fmt: skip
    alive = add_run(store, mode="incident", status="running", finished=False, started_at=now)
    launcher = PrefectLauncher(server.api, server.deployment)
    request = IncidentRequest(
        plan_path=populated.plan_path, plan_name="lab", operator="carol", reason="r",
        confirmation="lab", declared_at=dt.datetime.now(dt.UTC),
    )  # fmt: skip
    refused = declare_incident(request, store, launcher)
    assert not refused.accepted and [r.id for r in refused.blocking] == [alive]
    store.update_run(alive, finished_at=dt.datetime.now(dt.UTC), status="failed")
    held = declare_incident(request, store, launcher)
    assert not held.accepted and [r.id for r in held.blocking] == [stale]
    assert f"`drills recover {stale} --complete` finishes that takeover" in held.message
    assert f"`drills recover {stale} --hold` keeps DR as it is" in held.message
    # Recovered (completed or held): the plan serves from DR, and a takeover starts from
    # the primary. Once that incident is failed back and closed, a new one may be declared.
    store.update_run(stale, finished_at=dt.datetime.now(dt.UTC), status="recovered")
    at_dr = declare_incident(request, store, launcher)
    assert not at_dr.accepted and "lab already serves from DR" in at_dr.message
    closed = IncidentLink(closed_at=dt.datetime.now(dt.UTC), closed_by="failback")
    store.update_run(stale, details=RunDetails(incident=closed))
    accepted = declare_incident(request, store, launcher)
    assert accepted.accepted, accepted.message


def _declared_by_carol(
    env: UiEnv, prefect_url: str, deployment: str, reason: str
) -> tuple[AppTest, Any]:
    """The declare page in lab mode after carol declared on the lab; and its one flow run."""
    env.set("DRILLS_UI_LAB", "1")
    at = open_page("declare")
    declare(fill_declaration(at, operator="carol", reason=reason, confirmation="lab"))
    [run] = flow_runs(prefect_url, deployment)
    return at, run


def test_an_incident_no_worker_has_started_is_cancelled_at_once_and_audited(
    declare_env: UiEnv, populated: Drilled, server: Server
) -> None:
    at, run = _declared_by_carol(declare_env, server.url, server.deployment, "by mistake")
    label = at.checkbox(key="declare.cancel_sure").label
    assert "stops where it is" in label and "--hold" in label
    assert at.button(key="declare.cancel").disabled  # until confirmed
    at.checkbox(key="declare.cancel_sure").check().run()
    at.button(key="declare.cancel").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert "it had not started, so nothing was changed" in shown(at), shown(at)
    [run] = flow_runs(server.url, server.deployment)
    assert run.state is not None and run.state.type.value == "CANCELLED"
    assert run.state.message == "cancelled from the dashboard by carol"
    at.run()
    assert "ended Cancelled without a history record" in shown(at)
    # A second cancel (a page that had not caught up) changes nothing, and says why.
    launcher = PrefectLauncher(server.api, server.deployment)
    assert launcher.active_runs(populated.plan_path, "lab") == []  # a new one may be declared
    outcome = cancel_flow_run(server.api, str(run.id), "again")
    assert not outcome.accepted and outcome.detail == "the flow run is already Cancelled"
    cancels = [e for e in _audit(declare_env) if e.action == "cancel-run"]
    assert [(e.who, e.accepted, e.plan) for e in cancels] == [("carol", True, "lab")]
    assert cancels[0].detail["flow_run_id"] == str(run.id)
    audit = open_page("declare").dataframe[0].value
    assert list(audit["action"][:2]) == ["cancel-run", "declare-incident"]


def declare_from_terminal(
    env: UiEnv, prefect_url: str, deployment: str, plan: str, *options: str
) -> subprocess.CompletedProcess[str]:
    """`drills serve run DEPLOYMENT -p mode=incident` against the test server and the
    dashboard's store (the deployment, unlike prefect.yaml's, has no mode of its own); no
    terminal, so nothing is asked."""
    return subprocess.run(
        [
            sys.executable, "-m", "drills", "serve", "run", deployment, "--no-wait",
            "--api-url", prefect_url, "--db", env.db_url,
            "--state-dir", str(env.tmp_path / "no-local-server"), "-p", f"plan={plan}",
            "-p", "mode=incident",
            *options,
        ],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _refusal_on_the_page(operator: str) -> str:
    at = open_page("declare")
    declare(fill_declaration(at, operator=operator, reason="from the page", confirmation="lab"))
    [error] = at.error
    prefix = "Incident **not** declared — "
    assert error.value.startswith(prefix), error.value
    return str(error.value).removeprefix(prefix)


def test_a_declaration_from_the_terminal_takes_the_dashboards_path(
    declare_env: UiEnv, populated: Drilled, server: Server
) -> None:
    """Checked, refused and audited as the dashboard's are: an incident declared from a
    terminal is in the audit log, and refused exactly when the page refuses, in its words."""
    declare_env.set("DRILLS_UI_LAB", "1")
    plan = populated.plan_path

    def terminal(*options: str) -> subprocess.CompletedProcess[str]:
        return declare_from_terminal(declare_env, server.url, server.deployment, plan, *options)

    unexplained = terminal("--operator", "erin", "--confirm", "lab")
    assert unexplained.returncode == 1
    assert "Incident not declared: refused: a reason is required" in unexplained.stderr
    assert flow_runs(server.url, server.deployment) == []

    started = terminal("--operator", "carol", "--reason", "region down", "--confirm", "lab")
    assert started.returncode == 0, started.stderr
    [run] = flow_runs(server.url, server.deployment)
    assert str(run.id) in started.stderr
    assert (run.parameters["operator"], run.parameters["reason"]) == ("carol", "region down")
    assert run.parameters["mode"] == "incident" and run.parameters["declared_at"]
    assert Path(run.parameters["plan"]) == Path(plan).resolve()
    assert "incident" in run.tags

    # While it is going, both refuse a second one, in the same words.
    on_the_page = _refusal_on_the_page("dave")
    again = terminal("--operator", "frank", "--reason", "again", "--confirm", "lab")
    assert again.returncode == 1
    assert f"Incident not declared: {on_the_page}" in again.stderr
    assert "already running" in on_the_page and str(run.id) in on_the_page

    # Stopped part-way, it holds the plan until recovered: both say what to decide.
    assert cancel_flow_run(server.api, str(run.id), "stopped for the test").accepted
    held = add_run(declare_env.store(), mode="incident", status="cancelled", finished=False,
                   flow_run_id=str(run.id))  # fmt: skip
    on_the_page = _refusal_on_the_page("dave")
    again = terminal("--operator", "frank", "--reason", "again", "--confirm", "lab")
    assert again.returncode == 1
    assert f"Incident not declared: {on_the_page}" in again.stderr
    assert f"drills recover {held} --complete" in on_the_page
    assert len(flow_runs(server.url, server.deployment)) == 1

    audit = [(e.who, e.accepted, e.reason) for e in _audit(declare_env)]
    assert audit == [
        ("erin", False, ""),
        ("carol", True, "region down"),
        ("dave", False, "from the page"),
        ("frank", False, "again"),
        ("dave", False, "from the page"),
        ("frank", False, "again"),
    ]
    events = _audit(declare_env)
    assert events[1].detail["flow_run_id"] == str(run.id)
    assert events[2].detail["outcome"] == events[3].detail["outcome"]
    assert events[4].detail["outcome"] == events[5].detail["outcome"]


def test_the_live_view_lists_each_step_of_the_running_phase_as_it_ends(
    declare_env: UiEnv, prefect_url: str, incident_deployment: str
) -> None:
    at, run = _declared_by_carol(declare_env, prefect_url, incident_deployment, "region down")
    t0 = dt.datetime.fromisoformat(run.parameters["declared_at"])

    def at_t0(seconds: float) -> str:
        return (t0 + dt.timedelta(seconds=seconds)).isoformat()

    def step(name: str, start: float, end: float | None, result: str = "") -> dict[str, object]:
        return {
            "name": name, "started_at": at_t0(start), "ended_at": at_t0(end) if end else None,
            "seconds": (end or 1.5) - start, "status": "ok" if end else "running",
            "result": result, "evidence": {},
        }  # fmt: skip

    # What the flow run has stored so far: the fence going on, its first step done.
    # The preflight began before the click reached the worker's clock: before T0, said so.
    preflight = step("preflight", -1.0, 0.9) | {"steps": [step("site endpoints seen", -1.0, -0.8)]}
    waiting = "kubernetes primary: timed out; failing for 4 s; retrying until 02:14:05 UTC"
    fence = step("fence", 1.0, None) | {
        "steps": [step("close primary ingress", 1.0, 1.3, "2 ingresses closed"),
                  step("stop primary writers", 1.3, None) | {"waiting": waiting, "waits": 3}]
    }  # fmt: skip
    store = declare_env.store()
    started = t0 + dt.timedelta(seconds=0.3)
    run_id = add_run(store, mode="incident", status="running", verdict=None, finished=False,
                     flow_run_id=str(run.id), started_at=started)  # fmt: skip
    store.update_run(run_id, t0=t0, timeline=[preflight, fence])
    at.run()
    page = shown(at)
    assert "close primary ingress (T0+1.3 s, 300 ms): 2 ingresses closed" in page, page
    assert f"stop primary writers (running): ↻ {waiting}" in page, page
    assert "**fence** (going on)" in page or "fence (going on)" in page, page
    assert "site endpoints seen (800 ms before T0, 200 ms)" in page, page
    assert "T0+-" not in page
    current = {m.label: (m.value, m.proto.delta) for m in at.metric}
    assert current["Current phase"][0] == "fence", current
    assert current["RTO clock"][1] == "running", current
    # While it runs, the form says why it is off, and its button cannot be clicked.
    assert button(at, DECLARE_BUTTON).disabled  # type: ignore[union-attr]
    assert any("Declaring is off while an incident run of **lab** is going" in i.value
               for i in at.info), [i.value for i in at.info]  # fmt: skip
    # Once the run has ended, the clock stops at what it measured, and the form is back.
    store.update_run(run_id, status="succeeded", verdict="met", rto_seconds=2.04,
                     finished_at=t0 + dt.timedelta(seconds=9))  # fmt: skip
    at.run()
    current = {m.label: (m.value, m.proto.delta) for m in at.metric}
    assert current["RTO clock"] == ("2.04 s", "measured"), current
    assert current["Verdict"][0] == "met", current
