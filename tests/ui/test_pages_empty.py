"""Every page on an empty history store and without Prefect: it says what is missing,
and the declare page offers no button."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from drills.cli import app as cli
from tests.support.ui import DECLARE_BUTTON, EXAMPLE_PLAN, UiEnv, button, open_page, shown
from ui.settings import plan_paths

BROKEN_PLAN = """\
name: Broken Plan
sites:
  primary: {}
workloads: []
objectives: {rto: 5m, rpo: soon}
"""


def test_readiness_page_without_any_snapshot(ui_env: UiEnv) -> None:
    at = open_page("readiness")
    text = shown(at)
    assert at.title[0].value == "Readiness"
    assert "gpu-platform — not checked yet" in at.tabs[0].label
    assert "Not checked yet" in text
    assert button(at, "Re-run checks") is not None


def test_readiness_page_without_plans_says_how_to_get_one(ui_env: UiEnv) -> None:
    ui_env.set("DRILLS_PLANS", str(ui_env.tmp_path / "none-*.yaml"))
    at = open_page("readiness")
    assert "No valid plan is configured" in shown(at)
    assert button(at, "Re-run checks") is None


def test_history_page_on_an_empty_store(ui_env: UiEnv) -> None:
    at = open_page("history")
    assert at.title[0].value == "Drill history"
    assert "No drill has run yet" in shown(at)
    assert len(at.dataframe) == 0
    assert [s.label for s in at.selectbox] == ["Plan", "Mode", "Verdict"]


def test_declare_page_needs_prefect_and_shows_no_button(ui_env: UiEnv) -> None:
    ui_env.set("DRILLS_UI_LAB", "1")  # even someone allowed to declare gets no button
    at = open_page("declare")
    errors = " ".join(e.value for e in at.error)
    assert "A Prefect server is needed to declare an incident" in errors
    assert "PREFECT_API_URL" in errors
    assert button(at, DECLARE_BUTTON) is None
    assert not at.text_input  # no confirmation field either


def test_declare_page_with_an_unreachable_prefect(ui_env: UiEnv, closed_port: str) -> None:
    ui_env.set("PREFECT_API_URL", f"http://{closed_port}/api")
    ui_env.set("DRILLS_UI_LAB", "1")
    at = open_page("declare")
    assert "the Prefect server does not answer" in " ".join(e.value for e in at.error)
    assert button(at, DECLARE_BUTTON) is None


def test_plans_page_shows_problems_as_the_cli_does(ui_env: UiEnv) -> None:
    broken = ui_env.tmp_path / "broken.yaml"
    broken.write_text(BROKEN_PLAN)
    ui_env.set("DRILLS_PLANS", f"{EXAMPLE_PLAN},{broken}")
    at = open_page("plans")
    text = shown(at)
    # The valid plan: the CLI's verdict line, its summary, objectives, and no drill yet.
    [shown_path, _] = plan_paths(f"{EXAMPLE_PLAN},{broken}")
    valid = CliRunner().invoke(cli, ["plan", "validate", shown_path])
    assert valid.exit_code == 0 and valid.output.strip().startswith("✓")
    assert valid.output.strip() in text
    assert "never drilled" in text
    assert "unknown: no Prefect server is configured" in text
    assert "RTO objective" in text and "api.ml.example.com" in text
    # The broken one: every problem, exactly as `drills plan validate` prints them.
    cli_out = CliRunner().invoke(cli, ["plan", "validate", str(broken)])
    assert cli_out.exit_code == 2
    cli_problems = [line for line in cli_out.output.splitlines() if line.startswith(str(broken))]
    assert len(cli_problems) >= 3
    page_problems = next(c.value for c in at.code).splitlines()
    assert page_problems == cli_problems
    assert f"✗ {broken}: {len(cli_problems)} problems" in text


def test_plans_page_lists_a_missing_file_as_a_problem(ui_env: UiEnv, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.yaml"
    ui_env.set("DRILLS_PLANS", str(missing))
    at = open_page("plans")
    assert f"✗ {missing}" in shown(at)
