"""The plan's validation_jobs: defaults that leave older plans and their digests as they
were, one clear error per mistake, and no credential written into a Job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from drills.cli import app
from drills.errors import PlanError
from drills.plan import plan_digest, plan_from_text
from drills.takeover.validation_jobs import job_manifest
from tests.support.drill import offline_lab_plan_data


def _text(jobs: list[dict[str, Any]] | None) -> str:
    data = offline_lab_plan_data()
    data.pop("validation_jobs", None)
    if jobs is not None:
        data["validation_jobs"] = jobs
    return yaml.safe_dump(data, sort_keys=False)


def _job(**fields: Any) -> dict[str, Any]:
    pod = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "r.example/t:1"}]}
    manifest = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": pod}}}
    return {"name": "probe", "namespace": "training", "manifest": manifest} | fields


def _problems(text: str) -> list[str]:
    with pytest.raises(PlanError) as raised:
        plan_from_text(text, "plan.yaml")
    return [f"{p.path}: {p.message}" for p in raised.value.problems]


def test_a_plan_without_validation_jobs_keeps_its_digest() -> None:
    without, empty = plan_from_text(_text(None)), plan_from_text(_text([]))
    assert without.validation_jobs == ()
    assert plan_digest(without) == plan_digest(empty)
    assert plan_digest(plan_from_text(_text([_job()]))) != plan_digest(without)


def test_a_validation_job_has_sane_defaults() -> None:
    [job] = plan_from_text(_text([_job()])).validation_jobs
    assert job.deadline == 1800.0 and job.output is None and job.in_incident is False


@pytest.mark.parametrize(
    ("job", "message"),
    [
        (_job(manifest=None), "give exactly one of manifest and manifest_file"),
        (_job(manifest_file="job.yaml"), "give exactly one of manifest and manifest_file"),
        (
            _job(manifest={"kind": "Deployment", "spec": {"template": {"spec": {}}}}),
            "kind must be Job, not 'Deployment'",
        ),
        (_job(manifest={"kind": "Job"}), "spec.template.spec (the pod) is missing"),
        (_job(deadline="0s"), "validation_jobs"),
    ],
)
def test_a_wrong_validation_job_is_one_clear_problem(job: dict[str, Any], message: str) -> None:
    [problem] = _problems(_text([job]))
    assert problem.startswith("validation_jobs") and message in problem, problem


def test_two_jobs_of_one_name_are_refused() -> None:
    [problem] = _problems(_text([_job(), _job()]))
    assert "probe" in problem


def test_a_credential_in_a_jobs_env_is_refused_but_a_tolerations_key_is_not() -> None:
    job = _job()
    spec = job["manifest"]["spec"]["template"]["spec"]
    spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    assert plan_from_text(_text([job])).validation_jobs[0].name == "probe"
    spec["containers"][0]["env"] = [{"name": "HF_TOKEN", "value": "hf_literal"}]
    [problem] = _problems(_text([job]))
    assert "env HF_TOKEN holds a literal value" in problem and "hf_literal" not in problem


def test_a_manifest_file_is_read_beside_the_plan_and_named_for_the_run(tmp_path: Path) -> None:
    manifest = _job()["manifest"]
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(manifest))
    job = _job(manifest=None, manifest_file="job.yaml", deadline="90s")
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(_text([job]))
    from drills.plan import load_plan

    plan = load_plan(plan_file)
    built = job_manifest(plan, plan.validation_jobs[0], "0123456789abcdef")
    assert built["metadata"]["name"] == "probe" and built["metadata"]["namespace"] == "training"
    assert built["metadata"]["labels"]["drills.dev/run"] == "0123456789abcdef"
    assert built["spec"]["activeDeadlineSeconds"] == 90


def test_lab_up_help_documents_drift_training() -> None:
    shown = CliRunner().invoke(app, ["lab", "up", "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0
    assert "--drift-training" in shown.output and "CUDA 12.8" in shown.output
