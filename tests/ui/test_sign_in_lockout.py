"""The operator password's lockout, in AppTest: each AppTest is a new session of the same
server, sharing one history store. Failures count per name across sessions, a correct
password during the lock is refused, and every failed or locked-out sign-in is audited."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import select
from streamlit.testing.v1 import AppTest

from drills.passwords import hash_password
from drills.store import sign_in
from drills.store.models import AuditEvent
from tests.support.ui import UiEnv, open_page, shown

PASSWORD = "correct horse battery staple"


def _session(env: UiEnv) -> AppTest:
    """A new browser session on the closed dashboard: only its sign-in form shows."""
    at = open_page()
    assert "signed-in users only" in shown(at)
    return at


def _sign_in(at: AppTest, name: str, password: str) -> str:
    at.text_input(key="app.sign_in.name").input(name)
    at.text_input(key="app.sign_in.secret").input(password)
    at.form_submit_button[0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    return " ".join(e.value for e in at.error)


def _sign_ins(env: UiEnv) -> list[tuple[str, bool, str]]:
    with env.store().session() as s:
        rows = s.scalars(
            select(AuditEvent).where(AuditEvent.action == "sign-in").order_by(AuditEvent.id)
        ).all()
        return [(e.who, e.accepted, str(e.detail["outcome"])) for e in rows]


def test_failures_count_across_sessions_and_lock_out_a_correct_password(ui_env: UiEnv) -> None:
    ui_env.set("DRILLS_UI_PUBLIC_READ", "0")
    ui_env.set("DRILLS_UI_OPERATOR_PASSWORD_HASH", hash_password(PASSWORD))
    free = sign_in.FREE_FAILURES
    # Two guesses a session: the count goes on from one session to the next.
    for n in range(free):
        if n % 2 == 0:
            at = _session(ui_env)
        assert _sign_in(at, "mallory", f"guess {n}") == "wrong password"
    locked = _sign_in(_session(ui_env), "Mallory", "one guess too many")
    assert locked.startswith("wrong password; too many failed attempts, try again in 60 s")
    # A new session, the right password: refused all the same, its password never checked.
    fresh = _session(ui_env)
    refused = _sign_in(fresh, "mallory", PASSWORD)
    assert refused.startswith("too many failed attempts; try again in")
    assert "signed-in users only" in shown(fresh) and "Signed in as" not in shown(fresh)
    # As if the server restarted: its cached store handle is gone, the store is not.
    st.cache_resource.clear()
    assert _sign_in(_session(ui_env), "mallory", PASSWORD).startswith("too many failed")
    # Someone else is not held up by mallory's guesses (AppTest has no client address).
    erin = _session(ui_env)
    assert _sign_in(erin, "erin", PASSWORD) == ""
    assert "Signed in as **erin**" in shown(erin)
    audited = _sign_ins(ui_env)
    assert audited[: free + 1] == [("mallory", False, "wrong password")] * free + [
        ("Mallory", False, "wrong password")
    ]
    assert [(who, ok) for who, ok, _ in audited[free + 1 :]] == [
        ("mallory", False), ("mallory", False), ("erin", True)
    ]  # fmt: skip
    assert all(why.startswith("locked out for ") for _, _, why in audited[free + 1 : -1])
    assert audited[-1][2] == "signed in"
    assert PASSWORD not in repr(audited)
