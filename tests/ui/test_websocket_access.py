"""The dashboard driven over its websocket by a client that bypasses the page: a real
`drills ui` server, a bare Streamlit client sending the widget trigger itself.

Public read shows, and nothing more: an anonymous trigger of "Re-run checks" runs no
check (no snapshot kept, not one request to the DR object store, where the canary would
be written) and is audited as refused; the same trigger in lab mode runs them all, which
shows that the trigger does reach the handler. The sign-in lockout holds per client
address across sessions and a restart of the server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse
from uuid import uuid4

import pytest
import yaml
from sqlalchemy import func, select

from drills.passwords import hash_password
from drills.store import sign_in
from drills.store.models import AuditEvent, ReadinessSnapshot
from drills_lab.procs import free_port
from drills_lab.runtime import LabInfo
from tests.support.browser import dashboard
from tests.support.faultproxy import FaultProxy
from tests.support.streamlit_ws import Page, StreamClient, text, trigger
from tests.support.ui import UiEnv

PASSWORD = "a long operator passphrase"
GUESSER = "127.0.0.9"  # the loopback address the guessing client connects from


@pytest.fixture()
def watched_plan(lab: LabInfo, ui_env: UiEnv) -> Iterator[tuple[str, FaultProxy]]:
    """A copy of the lab's plan whose DR object store and AWS APIs (the canary's bucket,
    the secrets) are reached through a proxy that counts every request."""
    source = Path(lab.state_dir) / "plan.yaml"
    plan = yaml.safe_load(source.read_text())
    name = f"ws-{uuid4().hex[:8]}"
    plan["name"] = name
    with FaultProxy(urlparse(lab.moto).netloc, http=True) as proxy:
        for section in ("objects", "aws"):
            plan["sites"]["dr"][section]["endpoint_url"] = f"http://{proxy.address}"
        copy = source.parent / f"{name}.yaml"  # beside the original: its references resolve
        copy.write_text(yaml.safe_dump(plan, sort_keys=False))
        ui_env.set("DRILLS_PLANS", str(copy))
        try:
            yield name, proxy
        finally:
            copy.unlink()


def _press_rerun(base: str) -> Page:
    with StreamClient(base) as client:
        page = client.run("readiness")
        button = page.widget("button", "Re-run checks")
        return client.run("readiness", [trigger(button.widget_id)])


def _snapshots(env: UiEnv, plan: str) -> int:
    with env.store().session() as s:
        query = select(func.count()).where(ReadinessSnapshot.plan == plan)
        return int(s.scalar(query.select_from(ReadinessSnapshot)) or 0)


def _audit(env: UiEnv, action: str) -> list[AuditEvent]:
    with env.store().session() as s:
        query = select(AuditEvent).where(AuditEvent.action == action).order_by(AuditEvent.id)
        return list(s.scalars(query).all())


def test_an_anonymous_client_triggering_re_run_checks_is_refused_and_audited(
    ui_env: UiEnv, watched_plan: tuple[str, FaultProxy], tmp_path: Path
) -> None:
    plan, proxy = watched_plan
    # Production as shipped: public read, operators sign in with a password.
    ui_env.set("DRILLS_UI_OPERATOR_PASSWORD_HASH", hash_password(PASSWORD))
    with dashboard({}, tmp_path / "ui.log", tmp_path, lab=False) as base:
        shown = _press_rerun(base)
    assert "Not done: re-running the readiness checks needs the operator role" in shown.text
    assert not [e for e in shown.elements if e.kind == "exception"]
    assert _snapshots(ui_env, plan) == 0
    assert proxy.counters.connections == 0 and proxy.counters.requests == 0
    [refused] = _audit(ui_env, "run-readiness")
    assert (refused.who, refused.plan, refused.accepted) == ("anonymous", plan, False)
    assert str(refused.detail["outcome"]).startswith(
        "refused: re-running the readiness checks needs the operator role"
    )


def test_the_same_trigger_in_lab_mode_runs_every_check(
    ui_env: UiEnv, watched_plan: tuple[str, FaultProxy], tmp_path: Path
) -> None:
    """The control: the client's trigger reaches the handler, which runs the checks."""
    plan, proxy = watched_plan
    with dashboard({}, tmp_path / "ui.log", tmp_path, lab=True) as base:
        shown = _press_rerun(base)
    assert "Not done" not in shown.text
    assert _snapshots(ui_env, plan) == 1
    assert proxy.counters.requests > 0  # the canary's put, among others
    [accepted] = _audit(ui_env, "run-readiness")
    assert (accepted.who, accepted.plan, accepted.accepted) == ("anonymous (lab mode)", plan, True)


def _sign_in(base: str, name: str, password: str, *, source: str) -> Page:
    """A new session from ``source`` signs in on the closed dashboard's form."""
    with StreamClient(base, source=source) as client:
        page = client.run()
        form = [
            text(page.widget("text_input", "Your name").widget_id, name),
            text(page.widget("text_input", "Operator password").widget_id, password),
            trigger(page.widget("button", "Sign in").widget_id),
        ]
        return client.run("", form)


def test_the_lockout_holds_per_address_across_sessions_and_a_restart(
    ui_env: UiEnv, tmp_path: Path
) -> None:
    ui_env.set("DRILLS_UI_PUBLIC_READ", "0")
    ui_env.set("DRILLS_UI_OPERATOR_PASSWORD_HASH", hash_password(PASSWORD))
    port = free_port()
    with dashboard({}, tmp_path / "ui-1.log", tmp_path, lab=False, port=port) as base:
        # A new session and a new name for each guess, all from one address.
        for n in range(sign_in.FREE_FAILURES):
            assert "wrong password" in _sign_in(base, f"guesser{n}", "guess", source=GUESSER).text
        last = _sign_in(base, "guesser-last", "guess", source=GUESSER).text
        assert "too many failed attempts, try again in 60 s" in last
    with dashboard({}, tmp_path / "ui-2.log", tmp_path, lab=False, port=port) as base:
        refused = _sign_in(base, "olivia", PASSWORD, source=GUESSER)
        assert "too many failed attempts; try again in" in refused.text
        assert "signed-in users only" in refused.text
        # From another address the same password signs in at once.
        other = _sign_in(base, "olivia", PASSWORD, source="127.0.0.10")
        assert "too many failed" not in other.text and "signed-in users only" not in other.text
    audited = [(e.who, e.accepted, e.detail["address"]) for e in _audit(ui_env, "sign-in")]
    guesses = [(f"guesser{n}", False, GUESSER) for n in range(sign_in.FREE_FAILURES)]
    assert audited == [
        *guesses, ("guesser-last", False, GUESSER), ("olivia", False, GUESSER),
        ("olivia", True, "127.0.0.10"),
    ]  # fmt: skip
