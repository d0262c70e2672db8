"""The shipped alert rules: valid for promtool, and each alert's unit tests pass."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from tests.support.services import require_system_binary

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
RULES = DEPLOY / "drills-rules.yml"
UNIT_TESTS = sorted((DEPLOY / "tests").glob("*.yml"))
RUNBOOKS = DEPLOY.parents[1] / "docs" / "how-to" / "alerts-and-notifications.md"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = require_system_binary("promtool", "prometheus")
    return subprocess.run(
        [promtool, *args], capture_output=True, text=True, timeout=60, check=False
    )


def _alerts() -> list[dict[str, object]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_promtool_check_rules() -> None:
    done = _promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_unit_tests_pass() -> None:
    done = _promtool("test", "rules", *map(str, UNIT_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_a_unit_test_a_severity_and_a_runbook_section() -> None:
    tested = {
        check["alertname"]
        for path in UNIT_TESTS
        for test in yaml.safe_load(path.read_text())["tests"]
        for check in test["alert_rule_test"]
        if check["exp_alerts"]
    }
    runbooks = RUNBOOKS.read_text()
    for rule in _alerts():
        name = str(rule["alert"])
        assert name in tested, f"{name} has no promtool test where it fires"
        labels, notes = rule["labels"], rule["annotations"]
        assert isinstance(labels, dict) and isinstance(notes, dict)
        assert labels["severity"] in ("critical", "warning", "info"), name
        assert {"summary", "description", "runbook_url"} <= notes.keys(), name
        anchor = str(notes["runbook_url"]).rsplit("#", 1)[1]
        assert anchor == name.lower()
        assert f"\n#### {name}\n" in runbooks, f"the docs have no runbook section for {name}"
