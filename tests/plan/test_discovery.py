"""Which plan files the dashboard, `drills metrics serve` and `evidence coverage` read."""

from __future__ import annotations

from pathlib import Path

import pytest

from drills.plan.discovery import default_plan_patterns, plan_paths


@pytest.fixture
def plans_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plans").mkdir()
    for name in ("payments.yaml", "gpu-platform.example.yaml", "other.Example.yml"):
        (tmp_path / "plans" / name).write_text("name: x\n", encoding="utf-8")
    return tmp_path


def test_default_globs_leave_example_plans_out(plans_dir: Path) -> None:
    defaults = [*default_plan_patterns(plans_dir / ".lab" / "plan.yaml"), "plans/*.yml"]
    assert plan_paths(None, defaults) == ("plans/payments.yaml",)
    assert plan_paths("  ", defaults) == ("plans/payments.yaml",)


def test_the_lab_plan_comes_first_when_the_lab_wrote_one(plans_dir: Path) -> None:
    lab = plans_dir / ".lab" / "plan.yaml"
    lab.parent.mkdir()
    lab.write_text("name: lab\n", encoding="utf-8")
    assert plan_paths(None, default_plan_patterns(lab)) == (".lab/plan.yaml", "plans/payments.yaml")


def test_example_plans_named_by_the_operator_are_read(plans_dir: Path) -> None:
    assert plan_paths("plans/*.yaml", []) == (
        "plans/gpu-platform.example.yaml",
        "plans/payments.yaml",
    )
    assert plan_paths("plans/gpu-platform.example.yaml", []) == ("plans/gpu-platform.example.yaml",)


def test_the_repository_example_is_not_a_default_plan() -> None:
    root = Path(__file__).parents[2]
    assert (root / "plans" / "gpu-platform.example.yaml").exists()
    found = [Path(p).resolve() for p in plan_paths(None, [str(root / "plans" / "*.yaml")])]
    assert root / "plans" / "gpu-platform.example.yaml" not in found
