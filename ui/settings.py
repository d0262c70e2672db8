"""What the dashboard is configured with: plans, history store, Prefect, access.

Read from the environment on every script run, so a test (or an operator) can change
it without restarting the server. OIDC is configured in Streamlit's secrets instead
(an ``[auth]`` section), because that is where ``st.login`` reads it.

- ``DRILLS_PLANS``: plan files or globs, separated by ``,`` or ``:``; by default
  ``.lab/plan.yaml`` (when the lab wrote one), then ``plans/*.yaml``.
- ``DRILLS_DB_URL``: the history store (see drills/history.py).
- ``PREFECT_API_URL``: the Prefect server; unset or empty means "no Prefect".
  ``PREFECT_API_KEY`` or ``PREFECT_API_AUTH_STRING`` if it needs credentials (from the
  environment, or the Prefect profile the URL came from).
- ``PREFECT_UI_URL``: where links to runs point; by default the API URL without ``/api``.
- ``DRILLS_UI_LAB=1``: lab mode, anyone may declare an incident (a banner says so).
- ``DRILLS_UI_PUBLIC_READ=0``: the read-only pages need a signed-in user too.
- ``DRILLS_UI_OPERATOR_PASSWORD_HASH``: the operator password's hash
  (`drills ui hash-password`).
- ``DRILLS_UI_OPERATORS``, ``DRILLS_UI_OPERATOR_GROUPS``: the OIDC allow-list, e-mails or
  user names, and groups.
- ``DRILLS_INCIDENT_DEPLOYMENT``, ``DRILLS_FAILBACK_DEPLOYMENT``, ``DRILLS_DRILL_DEPLOYMENT``,
  ``DRILLS_READINESS_DEPLOYMENT``: Prefect deployment names, if not prefect.yaml's.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from drills.orchestrator import INCIDENT_DEPLOYMENT, auth_headers
from drills.plan import default_plan_patterns
from drills.plan import plan_paths as find_plan_paths
from drills.store import database_url

DRILL_DEPLOYMENT = "minimum-takeover-drill/quarterly-drill"
READINESS_DEPLOYMENT = "readiness-check/readiness-check"
FAILBACK_DEPLOYMENT = "minimum-takeover-drill/failback"
TRUE = frozenset({"1", "true", "yes", "on"})


@dataclass(frozen=True)
class UISettings:
    plan_paths: tuple[str, ...]
    db_url: str
    prefect_api_url: str | None
    prefect_ui_url: str | None
    lab_mode: bool
    public_read: bool
    operator_password_hash: str | None
    operators: frozenset[str]
    operator_groups: frozenset[str]
    incident_deployment: str
    failback_deployment: str
    drill_deployment: str
    readiness_deployment: str

    @property
    def prefect_configured(self) -> bool:
        return self.prefect_api_url is not None

    def flow_run_url(self, flow_run_id: str) -> str | None:
        if not self.prefect_ui_url:
            return None
        return f"{self.prefect_ui_url}/runs/flow-run/{flow_run_id}"


def _flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    return value.strip().lower() in TRUE


def _names(name: str) -> frozenset[str]:
    return frozenset(
        v.strip().lower() for v in re.split(r"[,\s]+", os.environ.get(name, "")) if v.strip()
    )


def plan_paths(spec: str | None) -> tuple[str, ...]:
    """Plan files named by ``spec`` (see drills.plan.discovery); by default
    ``.lab/plan.yaml`` when the lab wrote one, then ``plans/*.yaml``."""
    return find_plan_paths(spec, default_plan_patterns())


def _prefect_api_url() -> str | None:
    # The environment wins, and an empty value switches Prefect off; otherwise ask
    # Prefect's own settings (a profile may hold the URL).
    if "PREFECT_API_URL" in os.environ:
        return os.environ["PREFECT_API_URL"].strip().rstrip("/") or None
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    return url.rstrip("/") if url else None


def prefect_headers() -> dict[str, str]:
    """Credentials for the Prefect API, read where its URL was.

    Kept out of UISettings on purpose: settings are shown and cached, a key must not be.
    """
    headers = auth_headers()
    if headers or "PREFECT_API_URL" in os.environ:
        return headers
    from prefect.settings import get_current_settings

    api = get_current_settings().api
    return auth_headers(
        api.key.get_secret_value() if api.key else None,
        api.auth_string.get_secret_value() if api.auth_string else None,
    )


def _prefect_ui_url(api_url: str | None) -> str | None:
    explicit = os.environ.get("PREFECT_UI_URL", "").strip().rstrip("/")
    if explicit:
        return explicit
    if api_url is None:
        return None
    return api_url.removesuffix("/api")


def load_settings() -> UISettings:
    api_url = _prefect_api_url()
    return UISettings(
        plan_paths=plan_paths(os.environ.get("DRILLS_PLANS")),
        db_url=database_url(),
        prefect_api_url=api_url,
        prefect_ui_url=_prefect_ui_url(api_url),
        lab_mode=_flag("DRILLS_UI_LAB", False),
        public_read=_flag("DRILLS_UI_PUBLIC_READ", True),
        operator_password_hash=os.environ.get("DRILLS_UI_OPERATOR_PASSWORD_HASH", "").strip()
        or None,
        operators=_names("DRILLS_UI_OPERATORS"),
        operator_groups=_names("DRILLS_UI_OPERATOR_GROUPS"),
        incident_deployment=os.environ.get("DRILLS_INCIDENT_DEPLOYMENT", INCIDENT_DEPLOYMENT),
        failback_deployment=os.environ.get("DRILLS_FAILBACK_DEPLOYMENT", FAILBACK_DEPLOYMENT),
        drill_deployment=os.environ.get("DRILLS_DRILL_DEPLOYMENT", DRILL_DEPLOYMENT),
        readiness_deployment=os.environ.get("DRILLS_READINESS_DEPLOYMENT", READINESS_DEPLOYMENT),
    )
