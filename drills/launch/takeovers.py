"""The real takeovers a person asks for on the Prefect server: an incident declared (or an
alert's proposal approved) and a failback. `drills serve run` and the dashboard's buttons
both come here.

Each goes through the takeover's own gate (drills.takeover.incident, .proposals,
.failback_request): checked, refused or started, and audited the same way wherever a
person asks. This module only gives that gate its launcher over a deployment.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from drills.errors import TargetError
from drills.launch.deployment_runs import start
from drills.orchestrator.flow_runs import runs_of_plan
from drills.orchestrator.rest import NOT_FINAL_STATES, PrefectRest
from drills.store.history import HistoryStore
from drills.takeover import proposals
from drills.takeover.failback_request import FailbackRequest, request_failback
from drills.takeover.incident import ActiveRun, Declaration, IncidentRequest, declare_incident


@dataclass(frozen=True)
class Consent:
    """What a person gave to start a real run of a plan: who, why, and the plan's name
    typed to confirm it. Its fields are those of an incident's and a failback's request."""

    plan_path: str
    plan_name: str
    operator: str
    reason: str
    confirmation: str


class PrefectLauncher:
    """The launcher of incidents (drills.takeover.incident) and failbacks
    (drills.takeover.failback_request) over a deployment of the drill flow."""

    def __init__(
        self, api: PrefectRest, deployment: str, *, tags: tuple[str, ...] = ("incident",)
    ) -> None:
        self.api = api
        self.deployment = deployment
        self.tags = tags

    def active_runs(self, plan_path: str, plan_name: str) -> list[ActiveRun]:
        deployment = self.api.deployment(self.deployment)
        runs = runs_of_plan(self.api, deployment, NOT_FINAL_STATES, plan_path, plan_name)
        return [ActiveRun(run.id, "prefect", run.state_type) for run in runs]

    def is_finished(self, flow_run_id: str) -> bool | None:
        try:
            return self.api.flow_run(flow_run_id).final
        except TargetError:
            return None

    def start(self, parameters: dict[str, Any], *, idempotency_key: str) -> str:
        run = start(
            self.api, self.deployment, parameters, idempotency_key=idempotency_key,
            tags=self.tags,
        )  # fmt: skip
        return run.id


def declare(
    api: PrefectRest,
    deployment: str,
    history: HistoryStore,
    consent: Consent,
    *,
    declared_at: dt.datetime,
    force_unfenced: bool = False,
    extra_parameters: Mapping[str, Any] | None = None,
) -> Declaration:
    """Declare an incident (T0 ``declared_at``) as a run of ``deployment``: checked, refused
    while the plan is held, audited either way."""
    request = IncidentRequest(
        **asdict(consent), declared_at=declared_at, force_unfenced=force_unfenced,
        extra_parameters=extra_parameters or {},
    )  # fmt: skip
    return declare_incident(request, history, PrefectLauncher(api, deployment))


def approve_proposal(
    api: PrefectRest, deployment: str, history: HistoryStore, approval: proposals.Approval
) -> Declaration:
    """Declare the incident an alert proposed, approved by a person, as a run of
    ``deployment``."""
    return proposals.approve(approval, history, PrefectLauncher(api, deployment))


def fail_back(
    api: PrefectRest,
    deployment: str,
    history: HistoryStore,
    consent: Consent,
    *,
    requested_at: dt.datetime,
    extra_parameters: Mapping[str, Any] | None = None,
) -> Declaration:
    """Ask for the failback of the plan as a run of ``deployment``: refused unless the plan
    serves from DR and nothing is in the way, audited either way."""
    request = FailbackRequest(
        **asdict(consent), requested_at=requested_at, extra_parameters=extra_parameters or {}
    )
    launcher = PrefectLauncher(api, deployment, tags=("failback",))
    return request_failback(request, history, launcher)
