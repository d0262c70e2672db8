"""The dashboard and the Prefect server: whether it can be used, its deployments and flow
runs as the pages show them, and what the pages start there (a readiness run, an incident,
a failback, an approved proposal) or cancel.

Every start goes through drills.launch, as `drills serve run` does; the reads are cached
briefly, the live views' polls are not, and every action clears the caches.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

import streamlit as st

from drills import launch
from drills.errors import TargetError
from drills.launch import Consent, approve_proposal, start
from drills.orchestrator import (
    CancelOutcome,
    DeploymentInfo,
    FlowRunProgress,
    PrefectRest,
    cancel_flow_run,
    deployment_info,
    flow_run_progress,
)
from drills.takeover import Declaration, ProposalApproval
from ui.data import CANCEL_ACTION, MEDIUM, SHORT, PlanEntry, clear_caches, store
from ui.settings import UISettings, prefect_headers

log = logging.getLogger("drills.ui.launches")


@dataclass(frozen=True)
class PrefectState:
    configured: bool
    problem: str | None  # why it cannot be used; None when it can

    @property
    def usable(self) -> bool:
        return self.configured and self.problem is None


# --- Prefect --------------------------------------------------------------------------


def _prefect(api_url: str | None) -> PrefectRest:
    """A client of the Prefect server (use it in ``with``); pages ask only once one is set."""
    assert api_url is not None
    return PrefectRest(api_url, headers=prefect_headers())


@st.cache_data(ttl=SHORT, show_spinner=False)
def _prefect_problem(api_url: str) -> str | None:
    with _prefect(api_url) as api:
        return api.health_problem()


def prefect_state(settings: UISettings) -> PrefectState:
    if settings.prefect_api_url is None:
        return PrefectState(False, "no Prefect server is configured (PREFECT_API_URL)")
    problem = _prefect_problem(settings.prefect_api_url)
    return PrefectState(True, f"the Prefect server does not answer: {problem}" if problem else None)


@st.cache_data(ttl=SHORT, show_spinner=False)
def deployment_exists(api_url: str, name: str) -> bool:
    try:
        with _prefect(api_url) as api:
            return api.find_deployment(name) is not None
    except TargetError as exc:
        log.warning("cannot read deployment %s: %s", name, exc)
        return False


@st.cache_data(ttl=MEDIUM, show_spinner=False)
def deployment(api_url: str, name: str, plan_path: str, plan_name: str) -> DeploymentInfo | None:
    try:
        with _prefect(api_url) as api:
            return deployment_info(api, name, plan_path, plan_name)
    except TargetError as exc:
        log.warning("cannot read deployment %s: %s", name, exc)
        return None


def flow_run(settings: UISettings, flow_run_id: str) -> FlowRunProgress | None:
    """Not cached: the live views poll it."""
    if settings.prefect_api_url is None:
        return None
    try:
        with _prefect(settings.prefect_api_url) as api:
            return flow_run_progress(api, flow_run_id)
    except TargetError as exc:
        log.warning("cannot read flow run %s: %s", flow_run_id, exc)
        return None


# --- declaring ----------------------------------------------------------------------------


def declare(
    settings: UISettings,
    entry: PlanEntry,
    *,
    operator: str,
    reason: str,
    confirmation: str,
    force_unfenced: bool,
    declared_at: dt.datetime,
) -> Declaration:
    """Hand the declaration to the launcher, which checks, audits and starts it."""
    consent = Consent(entry.path, entry.name, operator, reason, confirmation)
    try:
        with _prefect(settings.prefect_api_url) as api:
            return launch.declare(
                api, settings.incident_deployment, store(settings), consent,
                declared_at=declared_at, force_unfenced=force_unfenced,
            )  # fmt: skip
    finally:
        clear_caches()


def approve(settings: UISettings, approval: ProposalApproval) -> Declaration:
    """Hand an approved proposal to the launcher, which declares its incident."""
    try:
        with _prefect(settings.prefect_api_url) as api:
            return approve_proposal(api, settings.incident_deployment, store(settings), approval)
    finally:
        clear_caches()


def fail_back(
    settings: UISettings,
    entry: PlanEntry,
    *,
    operator: str,
    reason: str,
    confirmation: str,
    requested_at: dt.datetime,
) -> Declaration:
    """Hand the request to the launcher, which checks, audits and starts the `failback`
    deployment."""
    consent = Consent(entry.path, entry.name, operator, reason, confirmation)
    try:
        with _prefect(settings.prefect_api_url) as api:
            return launch.fail_back(
                api, settings.failback_deployment, store(settings), consent,
                requested_at=requested_at,
            )  # fmt: skip
    finally:
        clear_caches()


# --- cancelling ----------------------------------------------------------------------------


def cancel_run(
    settings: UISettings, *, flow_run_id: str, plan_name: str, run_id: str | None, who: str
) -> CancelOutcome:
    """Ask Prefect to cancel the flow run of a drill or incident, and audit who asked."""
    detail: dict[str, Any] = {"flow_run_id": flow_run_id, "run_id": run_id}
    try:
        with _prefect(settings.prefect_api_url) as api:
            outcome = cancel_flow_run(api, flow_run_id, f"cancelled from the dashboard by {who}")
    except TargetError as exc:
        outcome = CancelOutcome(False, "unknown", str(exc))
    detail["outcome"] = f"{outcome.state_name}: {outcome.detail}"
    store(settings).audit(
        who=who,
        action=CANCEL_ACTION,
        plan=plan_name,
        accepted=outcome.accepted,
        reason=f"cancel flow run {flow_run_id}",
        detail=detail,
    )
    clear_caches()
    return outcome


# --- starting ---------------------------------------------------------------------------------


def start_readiness_run(settings: UISettings, entry: PlanEntry) -> str:
    with _prefect(settings.prefect_api_url) as api:
        run = start(api, settings.readiness_deployment, {"plan": entry.path}, tags=("dashboard",))
    return run.id
