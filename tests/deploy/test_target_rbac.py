"""The shipped roles for the target clusters grant exactly what drills uses.

A lab of its own records every request to each site's Kubernetes API (its audit log,
`drills lab up --audit`). Each scenario of SCENARIOS runs there as an operator runs it,
by the `drills` command; then every recorded request must pass the site's role in
deploy/kubernetes/targets/SITE/, evaluated as RBAC does (tests/support/rbac.py), and
every (group, resource, verb, name) the role grants must have been used by some request.

The set of requests is whatever the scenarios made, never a list kept here: a new kind of
request drills makes (a new check reading another resource) fails the first test, naming
it, until the roles grant it; a grant nothing uses any more fails the second.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from drills_lab.kubeapi.audit import AuditEvent
from drills_lab.runtime import LabInfo
from tests.support.drill import drills_cli, lab_plan_file
from tests.support.lab_audit import AuditCursor
from tests.support.rbac import Rule, allowed, describe, load_rules
from tests.support.services import own_lab
from tests.support.ui import ROOT

# Which API verbs a scenario uses (a watch, or a read that finds it ready) depends on
# timing: serial.
pytestmark = [pytest.mark.slow, pytest.mark.serial]

TARGETS = ROOT / "deploy" / "kubernetes" / "targets"
SITES = ("primary", "dr")


@dataclass
class LabRun:
    """The lab the scenarios share, and the history store their runs go to."""

    info: LabInfo
    db: str

    @property
    def plan(self) -> str:
        return str(lab_plan_file(self.info))

    def drills(self, *args: str, expect: int, crash_at: str | None = None) -> None:
        done = drills_cli(*args, db=self.db, crash_at=crash_at)
        assert done.returncode == expect, f"drills {' '.join(args)}:\n{done.stdout}{done.stderr}"


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[LabRun], None]


def _failing_smoke(plan: dict[str, Any]) -> None:
    plan["smoke"][0]["expect_body"] = "a site that never answers this"


# In order: each leaves the lab as a drill must, back on the primary (the incident
# leaves it on DR, and the failback brings it home). Readiness passes
# whole once the plan has been drilled (drill.cadence).
SCENARIOS: list[Scenario] = [
    Scenario("drill", lambda lab: lab.drills("run", lab.plan, "--yes", expect=0)),
    Scenario("readiness", lambda lab: lab.drills("readiness", lab.plan, expect=0)),
    Scenario(
        "failed drill (smoke fails, rolled back)",
        lambda lab: lab.drills(
            "run", str(lab_plan_file(lab.info, _failing_smoke)), "--yes", expect=1
        ),
    ),
    Scenario(
        "drill killed mid-way",
        lambda lab: lab.drills("run", lab.plan, "--yes", expect=-9, crash_at="phase:smoke:start"),
    ),
    Scenario("recover", lambda lab: lab.drills("recover", "--plan", "lab", expect=0)),
    Scenario(
        "incident",
        lambda lab: lab.drills(
            "run", lab.plan, "--mode", "incident", "--reason", "rbac", "--yes", expect=0
        ),
    ),
    Scenario("way-back readiness", lambda lab: lab.drills("readiness", lab.plan, expect=0)),
    Scenario(
        "failback", lambda lab: lab.drills("run", lab.plan, "--mode", "failback", "--yes", expect=0)
    ),
]


@dataclass
class Recorded:
    """Each site's requests, by the scenario that made them."""

    by_scenario: dict[str, dict[str, list[AuditEvent]]] = field(default_factory=dict)

    def events(self, site: str) -> Iterator[tuple[str, AuditEvent]]:
        for scenario, sites in self.by_scenario.items():
            for event in sites[site]:
                yield scenario, event


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    # drills lists a workload it scaled, then watches it unless the list finds it ready: a
    # pod ready 0.1 s after the scale was, on a loaded machine, sometimes ready by the list,
    # and a scenario's watch went unrecorded. Half a second leaves the watch to every wait.
    with own_lab(tmp_path_factory, "rbac-lab", ready_delay=0.5, audit=True) as info:
        lab = LabRun(info, f"sqlite:///{tmp_path_factory.mktemp('rbac-db') / 'history.db'}")
        cursors = {site: AuditCursor(info, site) for site in SITES}
        result = Recorded()
        for scenario in SCENARIOS:
            scenario.run(lab)
            result.by_scenario[scenario.name] = {s: c.take() for s, c in cursors.items()}
        yield result


def _rules(site: str) -> list[Rule]:
    return load_rules(TARGETS / site / "rbac.yaml")


@pytest.mark.parametrize("site", SITES)
def test_every_request_drills_makes_is_allowed_by_the_sites_role(
    recorded: Recorded, site: str
) -> None:
    rules = _rules(site)
    events = list(recorded.events(site))
    # The recording works, and the scenarios reached the cluster's writes.
    assert any(e.verb == "patch" and e.subresource == "scale" for _, e in events)
    denied: dict[str, set[str]] = {}
    for scenario, event in events:
        if not allowed(rules, event):
            denied.setdefault(describe(event), set()).add(scenario)
    assert not denied, f"{site}: requests the role does not grant:\n" + "\n".join(
        f"  {kind}   (by {', '.join(sorted(who))})" for kind, who in sorted(denied.items())
    )


@pytest.mark.parametrize("site", SITES)
def test_the_sites_role_grants_nothing_drills_never_uses(recorded: Recorded, site: str) -> None:
    events = [e for _, e in recorded.events(site) if e.is_resource]
    unused = [
        str(grant)
        for rule in _rules(site)
        for grant in rule.grants()
        if not any(grant.used_by(e) for e in events)
    ]
    assert not unused, f"{site}: the role grants what no scenario used: {unused}"


def test_no_rule_of_the_roles_uses_a_wildcard() -> None:
    for site in SITES:
        for rule in _rules(site):
            assert "*" not in (*rule.api_groups, *rule.verbs)
            assert not any(r == "*" or r.startswith("*/") for r in rule.resources), rule
