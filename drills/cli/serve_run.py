"""`drills serve run DEPLOYMENT`: start a flow run of a deployment on the Prefect server,
follow it to its report, printing a drill's steps as they end.

Runs are started and followed through the launcher (drills.launch), as the dashboard starts
them: an incident or a failback is asked for exactly as its buttons ask, the plan's name
confirmed and a reason given, audited either way. The command belongs to the `drills serve`
group (serve_group); serve_cmd imports this module when it registers the group, and this
module never imports serve_cmd.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.text import Text

from drills import timefmt
from drills.cli.common import open_history
from drills.cli.console import echo_markdown, step_line
from drills.cli.serve_group import StateDir, err, fail, serve_app
from drills.errors import DrillError
from drills.launch import DRILL_FLOW, drill_mode, follow, start
from drills.orchestrator import (
    SERVE_STATE_DIR,
    Deployment,
    FlowRunState,
    PrefectRest,
    auth_headers,
    local_history_url,
    redacted_url,
    serve_running,
)
from drills.store import HistoryStore, Mode, render_markdown, report_data

# The launcher (and the takeover under it) is imported by the commands that use it, so that
# the rest of the CLI starts at once.
if TYPE_CHECKING:
    from drills.launch import Consent

EXIT_STILL_RUNNING = 3


def parse_params(items: list[str]) -> dict[str, Any]:
    """KEY=VALUE pairs; a VALUE that is JSON (true, 3, "x") is taken as such, else as text."""
    params: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise fail(f"--param wants KEY=VALUE, not {item!r}", 2)
        try:
            params[key] = json.loads(raw)
        except json.JSONDecodeError:
            params[key] = raw
    return params


def _target(api_url: str | None, state_dir: Path) -> tuple[str, dict[str, str], str | None]:
    """Which server to talk to: --api-url, else the local one, else PREFECT_API_URL."""
    if api_url:
        return api_url, auth_headers(), None
    local = serve_running(state_dir)
    if local is not None:
        return local.api_url, {}, local_history_url(local)
    if from_env := os.environ.get("PREFECT_API_URL"):
        return from_env, auth_headers(), None
    raise fail("no Prefect server: start one with `drills serve` or set PREFECT_API_URL")


class StepPrinter:
    """Each step of a drill's run as it ends, from the history store (where the run writes
    each step as it ends), timed from T0: the click, for a declared incident."""

    def __init__(self, history: HistoryStore, t0: dt.datetime | None = None) -> None:
        from drills.takeover import every

        self.history = history
        self.t0 = t0
        self.printed: set[tuple[str, str, str]] = set()
        self.wait_due = every()  # a step waiting on a target: a line every few seconds

    def __call__(self, flow_run_id: str) -> None:
        from drills.orchestrator import drill_run_of

        run = drill_run_of(self.history, flow_run_id)
        if run is None:
            return
        t0 = run.t0 or self.t0
        for phase in run.timeline or []:
            for step in phase["steps"]:
                key = (phase["name"], step["name"], step["started_at"])
                if step["ended_at"] and key not in self.printed:
                    self.printed.add(key)
                    err.print(escape(_step_line(phase["name"], step, t0)))
                elif not step["ended_at"] and step.get("waiting") and self.wait_due(key):
                    err.print(escape(f"  waiting  {phase['name']}: {step['waiting']}"))


def _step_line(phase: str, step: dict[str, Any], t0: dt.datetime | None) -> str:
    ended = dt.datetime.fromisoformat(step["ended_at"])
    return step_line(phase, step["name"], step["status"], step["seconds"],
                     step.get("result") or "", ended, t0)  # fmt: skip


def _follow(
    api: PrefectRest,
    run: FlowRunState,
    ui: str,
    timeout: float,
    steps: StepPrinter | None = None,
) -> FlowRunState:
    shown = ""
    for run in follow(api, run, timeout=timeout):  # noqa: B020 - the last one is the answer
        if run.state_name != shown:
            shown = run.state_name
            now = timefmt.clock(dt.datetime.now(dt.UTC))
            err.print(Text(f"  {now}  {run.name}: {run.state_name or run.state_type}"))
            if run.state_type == "PAUSED":
                err.print(f"  waiting for approval: open {ui}/runs/flow-run/{run.id} and resume it")
        if steps is not None:
            steps(run.id)
    return run


@serve_app.command("run")
def run_deployment(
    deployment: Annotated[
        str,
        typer.Argument(
            metavar="DEPLOYMENT",
            help="quarterly-drill, readiness-check, declare-incident, failback, or "
            "FLOW/DEPLOYMENT.",
        ),
    ],
    param: Annotated[
        list[str] | None,
        typer.Option("--param", "-p", help="KEY=VALUE for a flow parameter; repeatable."),
    ] = None,
    operator: Annotated[
        str | None,
        typer.Option(
            "--operator",
            help="Who starts it: the drill's operator, and who declared an incident or asked "
            "for a failback in the audit log. Default: your login name ($USER).",
            show_default=False,
        ),
    ] = None,
    reason: Annotated[
        str | None,
        typer.Option(
            "--reason",
            help="Why it runs, kept with the run; an incident or a failback is refused "
            "without one.",
            show_default=False,
        ),
    ] = None,
    confirm: Annotated[
        str | None,
        typer.Option(
            "--confirm",
            metavar="PLAN_NAME",
            help="An incident or a failback only: the plan's name, as the dashboard has it "
            "typed. Asked for on a terminal when not given; anything else is refused.",
            show_default=False,
        ),
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Follow the run and print its report.")
    ] = True,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1.0, help="Seconds to follow the run.")
    ] = 3600.0,
    api_url: Annotated[
        str | None, typer.Option("--api-url", help="A Prefect API other than the local one.")
    ] = None,
    db: Annotated[
        str | None,
        typer.Option("--db", help="History store URL (default: the one the local worker uses)."),
    ] = None,
    state_dir: StateDir = SERVE_STATE_DIR,
) -> None:
    """Start a flow run of a deployment on the Prefect server and follow it to its report.

    It is executed by a worker, as a scheduled run would be (a declared
    incident by the warm runner, when one runs). For the drill flow,
    `operator` defaults to you, and each step is printed as it ends (timed
    from T0 for an incident).

    An incident (declare-incident, or mode=incident) is declared exactly as
    the dashboard declares it: T0 is now (or -p declared_at=ISO-8601), the
    plan's name must be confirmed and a reason given, it is refused while
    another incident of the plan runs or one stopped part-way waits for
    `drills recover`, and it goes to the audit log, accepted or refused.

    A failback (failback, or mode=failback) is asked for exactly as the
    dashboard's Fail back button asks: the plan's name confirmed and a reason
    given; refused unless the plan serves from DR, and while any run of the
    plan is going or waits for `drills recover`; audited either way.
    """
    url, headers, local_db = _target(api_url, state_dir)
    params = parse_params(param or [])
    try:
        with PrefectRest(url, headers=headers) as api:
            target = api.deployment(deployment)
            mode = drill_mode(target, params)
            if mode == Mode.INCIDENT:
                run = _declare(api, target, params, operator, reason, confirm, db or local_db)
            elif mode == Mode.FAILBACK:
                run = _fail_back(api, target, params, operator, reason, confirm, db or local_db)
            else:
                run = _start(api, target, params, operator, reason)
            ui = url.removesuffix("/api")
            err.print(
                Text(f"Flow run {run.name} of {target.full_name}: {ui}/runs/flow-run/{run.id}")
            )
            if not wait:
                return
            steps = None
            if target.flow_name == DRILL_FLOW:
                steps = StepPrinter(open_history(db or local_db), _t0_of(run))
            run = _follow(api, run, ui, timeout, steps)
    except DrillError as exc:
        raise fail(str(exc)) from None
    if not run.final:
        raise fail(f"{run.name} is still {run.state_name} after {timeout:.0f}s", EXIT_STILL_RUNNING)
    if target.flow_name == DRILL_FLOW:
        _print_report(open_history(db or local_db), run)
    if run.state_type != "COMPLETED":
        raise fail(f"{run.name} ended {run.state_name}: {run.message}")


def _start(
    api: PrefectRest,
    target: Deployment,
    params: dict[str, Any],
    operator: str | None,
    reason: str | None,
) -> FlowRunState:
    if target.flow_name == DRILL_FLOW:
        if operator is not None:
            params["operator"] = operator
        if reason is not None:
            params["reason"] = reason
        params.setdefault("operator", getpass.getuser())
    elif operator is not None or reason is not None:
        raise fail(f"--operator and --reason are parameters of {DRILL_FLOW} only", 2)
    return start(api, target, params)


def _declare(
    api: PrefectRest,
    target: Deployment,
    params: dict[str, Any],
    operator: str | None,
    reason: str | None,
    confirm: str | None,
    db_url: str | None,
) -> FlowRunState:
    """Declare the incident through the launcher, the dashboard's one path: validated,
    refused while the plan is held, audited either way."""
    from drills.launch import declare

    declared_at = _declared_at(params.pop("declared_at", None))  # T0: before anything else
    asked = _person_asks(target, params, operator, reason, confirm, INCIDENT_WARNING)
    declaration = declare(
        api, target.full_name, open_history(db_url), asked, declared_at=declared_at,
        force_unfenced=bool(params.pop("force_unfenced", False)), extra_parameters=params,
    )  # fmt: skip
    if not declaration.accepted or declaration.flow_run_id is None:
        raise fail(f"Incident not declared: {declaration.message}")
    err.print(
        Text(
            f"Incident on {asked.plan_name} declared by {asked.operator}; "
            f"T0 {declared_at.isoformat()}."
        )
    )
    return api.flow_run(declaration.flow_run_id)


def _fail_back(
    api: PrefectRest,
    target: Deployment,
    params: dict[str, Any],
    operator: str | None,
    reason: str | None,
    confirm: str | None,
    db_url: str | None,
) -> FlowRunState:
    """Ask for the failback through the launcher, the dashboard's one path: validated,
    refused unless the plan serves from DR and nothing is in the way, audited either way."""
    from drills.launch import fail_back

    requested_at = dt.datetime.now(dt.UTC)
    asked = _person_asks(target, params, operator, reason, confirm, FAILBACK_WARNING)
    decision = fail_back(
        api, target.full_name, open_history(db_url), asked, requested_at=requested_at,
        extra_parameters=params,
    )  # fmt: skip
    if not decision.accepted or decision.flow_run_id is None:
        raise fail(f"Failback not started: {decision.message}")
    err.print(Text(f"Failback of {asked.plan_name} started by {asked.operator}."))
    return api.flow_run(decision.flow_run_id)


def _person_asks(
    target: Deployment,
    params: dict[str, Any],
    operator: str | None,
    reason: str | None,
    confirm: str | None,
    warning: str,
) -> Consent:
    """Take who, why and the plan out of the options and ``params``; ask for the plan's
    name on a terminal when --confirm was not given."""
    from drills.cli.common import load_plan_or_exit
    from drills.launch import Consent

    # The options win over the same -p parameters, which still work as they did.
    passed = {key: params.pop(key, None) for key in ("operator", "reason", "mode")}
    operator = operator or str(passed["operator"] or getpass.getuser())
    reason = reason if reason is not None else str(passed["reason"] or "")
    plan_file = params.pop("plan", None) or target.parameters.get("plan")
    if not isinstance(plan_file, str) or not plan_file:
        raise fail(f"{target.full_name} has no plan: give -p plan=PATH", 2)
    plan_path = Path(plan_file).expanduser().resolve()
    plan = load_plan_or_exit(plan_path)
    if confirm is None:
        confirm = _ask_confirmation(plan.name, warning)
    return Consent(str(plan_path), plan.name, operator, reason, confirm)


def _t0_of(run: FlowRunState) -> dt.datetime | None:
    """An incident's T0, the moment it was declared, from its flow run's parameters."""
    declared = run.parameters.get("declared_at")
    if not declared:
        return None
    t0 = _declared_at(declared)
    return t0 if t0.tzinfo else t0.replace(tzinfo=dt.UTC)


def _declared_at(value: Any) -> dt.datetime:
    if value is None:
        return dt.datetime.now(dt.UTC)
    try:
        return dt.datetime.fromisoformat(str(value))
    except ValueError:
        raise fail(f"declared_at wants an ISO 8601 time, not {value!r}", 2) from None


INCIDENT_WARNING = "This starts a [bold]real failover[/] of {plan} to DR; nothing fails back."
FAILBACK_WARNING = (
    "This starts the [bold]real failback[/] of {plan}: DR's writers stop, and production "
    "returns to the primary."
)


def _ask_confirmation(plan_name: str, warning: str) -> str:
    """On a terminal, ask for the plan's name as the dashboard does; elsewhere nothing was
    typed, and the request is refused as the dashboard refuses an empty box."""
    if not sys.stdin.isatty():
        return ""
    err.print(warning.format(plan=escape(plan_name)))
    answer: str = typer.prompt(
        f"Type the plan name {plan_name} to confirm", default="", show_default=False
    )
    return answer


def _print_report(history: HistoryStore, run: FlowRunState) -> None:
    from drills.orchestrator import drill_run_of

    drill = drill_run_of(history, run.id)
    if drill is None:
        err.print(
            Text(
                f"flow run {run.name} recorded no drill in {redacted_url(history.url)}",
                style="yellow",
            )
        )
        return
    echo_markdown(render_markdown(report_data(drill, history)))
    err.print(f"The same report later: drills report {drill.id}   (--format json for machines)")
