"""The published plan schema: the same as `drills plan schema`, named by the example plans for
editors, and a standard JSON Schema validator accepts the plans and refuses a wrong type."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from drills.errors import PlanError
from drills.plan import plan_from_text, plan_schema_text
from drills_lab.planfile import SCHEMA_FILE, PlanOptions, write_plan
from tests.docs.conftest import ROOT
from tests.support.cli import drills_process
from tests.support.drill import OFFLINE_ENDPOINTS

PUBLISHED = ROOT / "docs" / "schema" / "plan.schema.json"
EXAMPLES = sorted((ROOT / "plans").glob("*.yaml"))
MARK = "# yaml-language-server: $schema="


def _validator() -> jsonschema.protocols.Validator:
    schema = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _schema_named_by(plan: Path) -> Path:
    first = plan.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith(MARK), f"{plan.name}: its first line does not name the schema"
    return (plan.parent / first.removeprefix(MARK)).resolve()


def test_published_schema_is_what_drills_plan_schema_prints() -> None:
    done = drills_process(["plan", "schema"])
    done.check_returncode()
    printed = done.stdout
    assert printed == plan_schema_text()
    assert PUBLISHED.read_text(encoding="utf-8") == printed, (
        "docs/schema/plan.schema.json is stale: drills plan schema -o docs/schema/plan.schema.json"
    )


@pytest.mark.parametrize("plan", EXAMPLES, ids=lambda p: p.name)
def test_example_plans_name_the_published_schema_and_validate(plan: Path) -> None:
    assert _schema_named_by(plan) == PUBLISHED.resolve()
    data = yaml.safe_load(plan.read_text(encoding="utf-8"))
    errors = list(_validator().iter_errors(data))
    assert not errors, [f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors]


def test_a_plan_with_a_wrong_type_is_refused_by_the_schema_and_by_drills() -> None:
    assert EXAMPLES, "no example plan in plans/"
    data: dict[str, Any] = yaml.safe_load(EXAMPLES[0].read_text(encoding="utf-8"))
    wrong = copy.deepcopy(data)
    wrong["workloads"][0]["dr_replicas"] = "three"
    errors = list(_validator().iter_errors(wrong))
    assert [list(e.absolute_path)[:3] for e in errors] == [["workloads", 0, "dr_replicas"]]
    with pytest.raises(PlanError, match="dr_replicas"):
        plan_from_text(yaml.safe_dump(wrong), "wrong.yaml")


def test_the_lab_plan_names_the_schema_written_beside_it(tmp_path: Path) -> None:
    # As `lab up` writes it with Prometheus: demand from a query, SLOs and a load probe.
    options = PlanOptions(demand_recorded=True, slo=True)
    write_plan(tmp_path / "plan.yaml", OFFLINE_ENDPOINTS, options)
    named = _schema_named_by(tmp_path / "plan.yaml")
    assert named == (tmp_path / SCHEMA_FILE).resolve()
    assert named.read_text(encoding="utf-8") == PUBLISHED.read_text(encoding="utf-8")
    data = yaml.safe_load((tmp_path / "plan.yaml").read_text(encoding="utf-8"))
    assert not list(_validator().iter_errors(data))
    assert data["slo"] and data["load"] and all(s["in_practice"] for s in data["slo"])
