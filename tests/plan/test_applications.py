"""Applications of a plan: every problem of their members in one plan error, and the view
one application's run sees (its members, and what no application lists)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from drills.errors import PlanError, PlanProblem
from drills.plan import DrillPlan, load_plan, plan_digest
from drills.plan.claims import plan_claims
from drills.plan.only import UnknownApplicationError, only_applications
from tests.support.drill import offline_lab_plan_data

PRACTICE_NAME = "practice.drills.test."
APPLICATIONS = [
    {"name": "training", "workloads": ["trainer", "training/data-loader"],
     "datasets": ["training-data"]},
    {"name": "platform", "workloads": ["platform/model-registry", "metrics-gateway"],
     "datasets": ["model-artifacts"], "dns_records": [PRACTICE_NAME]},
]  # fmt: skip


def _plan_file(tmp_path: Path, applications: list[dict[str, Any]]) -> Path:
    data = offline_lab_plan_data()
    data["practice"] = {"record": PRACTICE_NAME}
    data["applications"] = applications
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _plan(tmp_path: Path) -> DrillPlan:
    return load_plan(_plan_file(tmp_path, APPLICATIONS))


def _problems(tmp_path: Path, applications: list[dict[str, Any]]) -> list[tuple[str, str]]:
    with pytest.raises(PlanError) as raised:
        load_plan(_plan_file(tmp_path, applications))
    return [(p.path, p.message) for p in raised.value.problems]


def _only_problem(tmp_path: Path, data: dict[str, Any]) -> PlanProblem:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(PlanError) as raised:
        load_plan(path)
    (problem,) = raised.value.problems
    return problem


def test_every_problem_of_the_applications_is_one_plan_error(tmp_path: Path) -> None:
    problems = _problems(
        tmp_path,
        [
            {"name": "a", "workloads": ["no-such-workload", "trainer"], "datasets": ["nope"]},
            {"name": "a", "workloads": ["data-loader"]},
            {"name": "b", "workloads": ["training/trainer"], "datasets": ["checkpoints"],
             "dns_records": ["api.drills.test.", "other.drills.test."]},
            {"name": "c", "datasets": ["checkpoints"]},
        ],
    )  # fmt: skip
    by_path = dict(problems)
    assert len(problems) == 7, problems
    assert by_path["applications[0].workloads[0]"].startswith("no workload no-such-workload")
    assert "serving/llm-server" in by_path["applications[0].workloads[0]"]  # names the known
    assert by_path["applications[0].datasets[0]"].startswith("no dataset nope")
    assert by_path["applications[1].name"] == (
        "duplicate application `a` (already listed as applications[0])"
    )
    assert by_path["applications[2].workloads[0]"] == (
        "workload training/trainer is already in application a: a member belongs to one application"
    )
    assert "is the production record" in by_path["applications[2].dns_records[0]"]
    assert by_path["applications[2].dns_records[1]"].startswith("no DNS record other.drills.test.")
    assert by_path["applications[3].datasets[0]"].startswith(
        "dataset checkpoints is already in application b"
    )


def test_a_bare_name_two_namespaces_share_must_be_written_in_full(tmp_path: Path) -> None:
    data = offline_lab_plan_data()
    twin = dict(next(w for w in data["workloads"] if w["name"] == "trainer"))
    data["workloads"].append({**twin, "namespace": "research"})
    data["applications"] = [{"name": "training", "workloads": ["trainer"]}]
    problem = _only_problem(tmp_path, data)
    assert problem.path == "applications[0].workloads[0]"
    assert problem.message == (
        "trainer names 2 workloads (research/trainer, training/trainer): write namespace/name"
    )
    assert problem.line is not None  # located in the file, as every plan problem is


def test_an_application_whose_run_would_bring_nothing_up_is_refused(tmp_path: Path) -> None:
    data = offline_lab_plan_data()
    data["workloads"] = [w for w in data["workloads"] if w["tier"] == "batch"] + [
        next(w for w in data["workloads"] if w["name"] == "trainer")
    ]
    data["applications"] = [{"name": "batch", "workloads": ["eval-runner"]},
                            {"name": "training", "workloads": ["trainer"]}]  # fmt: skip
    problem = _only_problem(tmp_path, data)
    assert problem.path == "applications[0].workloads"
    assert "a run of application batch would bring nothing up at DR" in problem.message


def test_an_applications_view_holds_its_members_and_what_no_application_lists(
    tmp_path: Path,
) -> None:
    plan = _plan(tmp_path)
    view = only_applications(plan, "training")
    keys = {w.key for w in view.workloads}
    assert {"training/trainer", "training/data-loader", "serving/llm-server",
            "batch/eval-runner"} <= keys  # fmt: skip
    assert not keys & {"platform/model-registry", "platform/metrics-gateway"}
    assert {d.name for d in view.datasets} == {"training-data", "checkpoints"}
    assert view.practice.record is None  # the platform's: training probes DR's endpoint
    assert only_applications(plan, "platform").practice.record == PRACTICE_NAME
    assert (view.application, view.lease_name, view.whole) == ("training", "lab/training", plan)
    assert plan_digest(view) == plan_digest(plan)  # the file it came from
    assert only_applications(plan, None) is plan and plan.lease_name == "lab"


def test_an_unknown_application_names_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(UnknownApplicationError) as raised:
        only_applications(_plan(tmp_path), "billing")
    assert str(raised.value) == (
        "plan lab has no application 'billing' (its applications: training, platform)"
    )


def test_practices_of_two_applications_claim_nothing_in_common(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    training, platform = only_applications(plan, "training"), only_applications(plan, "platform")
    # They share what no application lists (the critical tier here): they overlap there...
    shared = set(plan_claims(training, practice=True)) & set(plan_claims(platform, practice=True))
    assert any("serving/Deployment/llm-server" in c.key for c in shared)
    assert not any("training/" in c.key or "platform/" in c.key for c in shared)
    # ...but each leaves the other's own workloads, datasets and practice name alone.
    mine = {str(c) for c in plan_claims(training, practice=True)}
    assert not any("platform/" in c or "models-" in c or PRACTICE_NAME in c for c in mine)
    # A practice never claims the primary's side or the production record.
    assert not any("127.0.0.2" in c or "api.drills.test." in c for c in mine)
    assert any("api.drills.test." in str(c) for c in plan_claims(training))
