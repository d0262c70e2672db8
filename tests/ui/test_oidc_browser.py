"""Real sign-in: the dashboard's OIDC sign-in (Streamlit's st.login, with Authlib) against a
real OpenID Connect provider on loopback (oidc-provider-mock), in system Chromium through
Playwright. Covered: signing in; a user on the allow-list may declare; one off it may read
but not declare; a group claim grants it; signing out; a sign-in whose ID token expired."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from drills_lab.procs import free_port
from tests.support.browser import CHROMIUM_ARGS, dashboard
from tests.support.drill import offline_lab_plan_text
from tests.support.services import require_system_binary
from tests.support.ui import DECLARE_BUTTON

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.slow

# The provider's ID tokens last this long: long enough for each person's steps, short
# enough to wait out for the expired sign-in.
TOKEN_S = 40
OPERATOR = "alice"  # on DRILLS_UI_OPERATORS by e-mail
READER = "bob"  # signed in, on no allow-list
ON_CALL = "carol"  # in the operator group
CLAIMS = {
    OPERATOR: {"email": "alice@example.test", "preferred_username": "alice"},
    READER: {"email": "bob@example.test"},
    ON_CALL: {"email": "carol@example.test", "groups": ["sre-oncall"]},
}


@dataclass(frozen=True)
class SignIn:
    base: str

    def sign_in(self, browser: Browser, who: str) -> Page:
        """A fresh browser (no cookies) that signs in as ``who`` from the declare page."""
        from playwright.sync_api import expect

        page = browser.new_context().new_page()
        page.set_default_timeout(30_000)
        page.goto(f"{self.base}/declare")
        page.get_by_role("button", name="Sign in").click()
        # The provider's own page: choose the person, as they would authenticate.
        page.get_by_role("button", name=who, exact=True).click()
        expect(page.get_by_text(f"Signed in as {CLAIMS[who]['email']}")).to_be_visible()
        return page


def _secrets_toml(ui_port: int, provider_url: str) -> str:
    return "\n".join([
        "[auth]",
        f'redirect_uri = "http://127.0.0.1:{ui_port}/oauth2callback"',
        f'cookie_secret = "{secrets.token_hex(32)}"',
        'client_id = "drills-dashboard"',
        f'client_secret = "{secrets.token_hex(16)}"',
        f'server_metadata_url = "{provider_url}/.well-known/openid-configuration"',
        "",
    ])  # fmt: skip


@pytest.fixture()
def provider_url() -> Iterator[str]:
    from oidc_provider_mock import User, run_server_in_thread

    users = [User(sub=who, claims=claims) for who, claims in CLAIMS.items()]
    with run_server_in_thread(
        access_token_max_age=timedelta(seconds=TOKEN_S), user_claims=users
    ) as server:
        yield f"http://localhost:{server.server_port}"


def test_oidc_sign_in_allow_lists_groups_sign_out_and_expiry(
    provider_url: str, prefect_url: str, incident_deployment: str, tmp_path: Path
) -> None:
    chromium = require_system_binary("chromium", "chromium")
    from playwright.sync_api import expect, sync_playwright

    (tmp_path / "plan.yaml").write_text(offline_lab_plan_text())
    ui_port = free_port()
    (tmp_path / ".streamlit").mkdir()
    (tmp_path / ".streamlit" / "secrets.toml").write_text(_secrets_toml(ui_port, provider_url))
    env = {
        "DRILLS_DB_URL": f"sqlite:///{tmp_path / 'history.db'}",
        "DRILLS_PLANS": "plan.yaml",
        "PREFECT_API_URL": prefect_url,
        "DRILLS_INCIDENT_DEPLOYMENT": incident_deployment,
        "DRILLS_UI_OPERATORS": CLAIMS[OPERATOR]["email"],
        "DRILLS_UI_OPERATOR_GROUPS": "sre-oncall",
    }
    with (
        dashboard(env, tmp_path / "ui.log", cwd=tmp_path, lab=False, port=ui_port) as base,
        sync_playwright() as pw,
    ):
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        expect.set_options(timeout=30_000)
        flow = SignIn(base)

        # Before signing in: the pages read, the declare page asks for a sign-in.
        anonymous = browser.new_page()
        anonymous.goto(f"{base}/declare")
        expect(anonymous.get_by_text("sign in to declare an incident")).to_be_visible()
        expect(anonymous.get_by_role("button", name=DECLARE_BUTTON)).to_have_count(0)

        # On the allow-list by e-mail: may declare, as herself.
        operator = flow.sign_in(browser, OPERATOR)
        signed_in_at = time.monotonic()
        operator.goto(f"{base}/declare")
        expect(operator.get_by_role("button", name=DECLARE_BUTTON)).to_be_visible()
        expect(operator.get_by_text("Declaring as alice@example.test")).to_be_visible()

        # Signed in, on no list: reads every page, may not declare.
        reader = flow.sign_in(browser, READER)
        reader.goto(f"{base}/history")
        expect(reader.get_by_role("heading", name="Drill history")).to_be_visible()
        reader.goto(f"{base}/declare")
        expect(
            reader.get_by_text("bob@example.test is not on the operator allow-list")
        ).to_be_visible()
        expect(reader.get_by_role("button", name=DECLARE_BUTTON)).to_have_count(0)

        # In the operator group (the groups claim): may declare.
        on_call = flow.sign_in(browser, ON_CALL)
        on_call.goto(f"{base}/declare")
        expect(on_call.get_by_role("button", name=DECLARE_BUTTON)).to_be_visible()

        # Signing out ends it, at the provider too (its end-session page), and for good: a
        # page opened afterwards has no name in the sidebar, no declaring, a sign-in offered.
        on_call.get_by_role("button", name="Sign out").click()
        on_call.get_by_role("button", name="End session").click()
        expect(on_call.get_by_role("heading", name="Fleet", exact=True)).to_be_visible()
        expect(on_call.get_by_text("Signed in as")).to_have_count(0)
        on_call.goto(f"{base}/declare")
        expect(on_call.get_by_role("heading", name="Incident", exact=True)).to_be_visible()
        expect(on_call.get_by_text("Signed in as")).to_have_count(0)
        expect(on_call.get_by_text("sign in to declare an incident")).to_be_visible()
        expect(on_call.get_by_role("button", name=DECLARE_BUTTON)).to_have_count(0)

        # The operator's ID token expires: the sign-in ends with it, whatever the cookie says.
        time.sleep(max(0.0, signed_in_at + TOKEN_S + 2 - time.monotonic()))
        operator.goto(f"{base}/declare")
        expect(operator.get_by_text("your sign-in has expired; sign in again")).to_be_visible()
        expect(operator.get_by_role("button", name=DECLARE_BUTTON)).to_have_count(0)
        expect(operator.get_by_role("button", name="Sign in")).to_be_visible()
        browser.close()
    assert "Traceback" not in (tmp_path / "ui.log").read_text()
