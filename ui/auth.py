"""Who may look, and who may declare an incident.

In order of precedence:

1. **OIDC**, when Streamlit's secrets hold an ``[auth]`` section: people sign in with
   ``st.login``; operators are those on the allow-list (``DRILLS_UI_OPERATORS``:
   e-mails or names, ``DRILLS_UI_OPERATOR_GROUPS``: groups from the ``groups`` claim).
   No allow-list means no operator: it fails closed. A sign-in lasts as long as the
   identity provider's ID token (its ``exp`` claim), not the 30 days of Streamlit's
   cookie: after that the person is signed out and must sign in again.
2. **Operator password**, when ``DRILLS_UI_OPERATOR_PASSWORD_HASH`` holds a hash made by
   `drills ui hash-password`. Operators sign in with their name (for the audit log) and
   the password.
3. **Lab mode** (``DRILLS_UI_LAB=1``): no sign-in, anyone may declare; a banner says so.
4. Otherwise nobody may declare.

Read-only pages are open unless ``DRILLS_UI_PUBLIC_READ=0``; then they need a signed-in
user too. Public read shows, and nothing more: every action that reaches a real system
needs the operator role (``can_declare``), checked where it is handled (ui/guard.py).

Failed password sign-ins are counted per user name and per client address in the history
store (drills.store.sign_in), so a new session or a restarted server does not start
afresh, and locked out for longer after each; every sign-in, failed, locked out or
accepted, is written to the audit log.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Literal

import streamlit as st

from drills.passwords import PasswordHashError, verify_password
from drills.store import (
    record_sign_in_failure,
    record_sign_in_success,
    sign_in_subjects,
    sign_in_wait_s,
)
from drills.text import for_markdown
from ui import data
from ui.settings import UISettings

log = logging.getLogger("drills.ui.auth")

Method = Literal["oidc", "password", "lab", "none"]
USER_KEY = "auth.user"
NAME_CHARS = 128  # what the audit log keeps of a typed name


@dataclass(frozen=True)
class Access:
    method: Method
    user: str | None  # who is signed in: the name written in the audit log
    can_view: bool
    can_declare: bool  # the operator role: declare, fail back, cancel, run checks, export
    why_not: str  # when not can_declare: what would allow it

    @property
    def signed_in(self) -> bool:
        return self.user is not None


def oidc_configured() -> bool:
    try:
        return "auth" in st.secrets
    except FileNotFoundError:
        return False


def _claim(name: str) -> Any:
    try:
        return st.user.get(name)
    except (AttributeError, KeyError):
        return None


def _expired() -> bool:
    """Whether the ID token the sign-in came with has expired (no ``exp``: never)."""
    exp = _claim("exp")
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        return False
    return exp <= time.time()


def _oidc_access(settings: UISettings) -> Access:
    logged_in = bool(_claim("is_logged_in"))
    if logged_in and _expired():
        return Access(
            "oidc",
            None,
            can_view=settings.public_read,
            can_declare=False,
            why_not="your sign-in has expired; sign in again",
        )
    user = (
        (_claim("email") or _claim("preferred_username") or _claim("name")) if logged_in else None
    )
    names = {str(v).lower() for v in (_claim("email"), _claim("preferred_username")) if v}
    groups = {str(g).lower() for g in (_claim("groups") or []) if isinstance(g, str)}
    allowed = logged_in and bool(names & settings.operators or groups & settings.operator_groups)
    if not (settings.operators or settings.operator_groups):
        why = "no operator allow-list is configured (DRILLS_UI_OPERATORS or _GROUPS)"
    elif not logged_in:
        why = "sign in to declare an incident"
    else:
        why = f"{user} is not on the operator allow-list"
    return Access(
        "oidc",
        str(user) if user else None,
        can_view=settings.public_read or logged_in,
        can_declare=allowed,
        why_not="" if allowed else why,
    )


def current_access(settings: UISettings) -> Access:
    if oidc_configured():
        return _oidc_access(settings)
    if settings.operator_password_hash:
        user = st.session_state.get(USER_KEY)
        return Access(
            "password",
            user,
            can_view=settings.public_read or user is not None,
            can_declare=user is not None,
            why_not="" if user else "sign in with the operator password to declare an incident",
        )
    if settings.lab_mode:
        return Access("lab", None, can_view=True, can_declare=True, why_not="")
    return Access(
        "none",
        None,
        can_view=settings.public_read,
        can_declare=False,
        why_not="nobody may declare: configure OIDC or DRILLS_UI_OPERATOR_PASSWORD_HASH",
    )


def _client_address() -> str | None:
    """The address the browser's connection came from; None when unknown (AppTest) or on
    loopback, where Streamlit gives none."""
    try:
        address = st.context.ip_address
    except (AttributeError, RuntimeError):
        return None
    return str(address) if address else None


def _audit_sign_in(
    settings: UISettings, name: str, *, accepted: bool, outcome: str, detail: dict[str, Any]
) -> None:
    data.store(settings).audit(
        who=name, action=data.SIGN_IN_ACTION, plan="", accepted=accepted,
        reason="operator password sign-in", detail={**detail, "outcome": outcome},
    )  # fmt: skip
    level = logging.INFO if accepted else logging.WARNING
    log.log(level, "operator sign-in as %r from %s: %s", name, detail.get("address"), outcome)


def _check_password(settings: UISettings, name: str, password: str) -> str | None:
    """None when signed in; otherwise what to tell the person. Failures count in the
    store, across sessions and restarts, per name and per address; each is audited."""
    assert settings.operator_password_hash is not None
    name = " ".join(name.split())[:NAME_CHARS]
    if not name:
        return "give your name: it goes into the audit log"
    address = _client_address()
    subjects = sign_in_subjects(name, address)
    store = data.store(settings)
    wait = sign_in_wait_s(store, subjects)
    if wait > 0:  # the password is not even looked at
        _audit_sign_in(settings, name, accepted=False, outcome=f"locked out for {wait:.0f} s more",
                       detail={"address": address, "locked_for_s": round(wait)})  # fmt: skip
        return f"too many failed attempts; try again in {wait:.0f} s"
    try:
        ok = verify_password(password, settings.operator_password_hash)
    except PasswordHashError as exc:
        log.error("DRILLS_UI_OPERATOR_PASSWORD_HASH is unusable: %s", exc)
        return "the operator password hash is misconfigured; see the server log"
    if not ok:
        failures, locked = record_sign_in_failure(store, subjects)
        _audit_sign_in(
            settings, name, accepted=False, outcome="wrong password",
            detail={"address": address, "failures": failures, "locked_for_s": round(locked)},
        )  # fmt: skip
        if locked:
            return f"wrong password; too many failed attempts, try again in {locked:.0f} s"
        return "wrong password"
    record_sign_in_success(store, subjects)
    _audit_sign_in(settings, name, accepted=True, outcome="signed in", detail={"address": address})
    st.session_state[USER_KEY] = name
    return None


def sign_in(settings: UISettings, access: Access, key: str) -> None:
    """The sign-in control for the configured method (nothing in lab mode)."""
    if access.method == "oidc" and not access.signed_in:
        if st.button("Sign in", key=f"{key}.oidc", type="primary"):
            st.login()
    elif access.method == "password" and not access.signed_in:
        with st.form(f"{key}.password"):
            name = st.text_input("Your name", key=f"{key}.name", max_chars=NAME_CHARS)
            password = st.text_input("Operator password", type="password", key=f"{key}.secret")
            if st.form_submit_button("Sign in"):
                problem = _check_password(settings, name, password)
                if problem:
                    st.error(problem)
                else:
                    st.rerun()


def sign_out_control(access: Access) -> None:
    """Who is signed in, and a way out; shown in the sidebar."""
    if not access.signed_in:
        return
    st.caption(f"Signed in as **{for_markdown(access.user or '')}**")
    if st.button("Sign out", key="auth.sign_out"):
        st.session_state.pop(USER_KEY, None)
        if access.method == "oidc":
            # The browser goes to /auth/logout, which deletes the identity cookie, then to
            # the provider's end-session page. A rerun here would drop that redirect: the
            # cookie would stay, and the next page opened would be signed in again.
            st.logout()
            return
        st.rerun()
