"""plan.warnings: readiness reports what `drills plan validate` warns about, and never blocks."""

from __future__ import annotations

from drills.checks.base import Status
from drills.plan import plan_from_text
from tests.plan.test_plan import SOURCE, VALID, altered
from tests.support.checks import run_check


def test_a_plan_without_warnings_passes() -> None:
    result = run_check(plan_from_text(VALID, SOURCE), "plan.warnings")
    assert result.status is Status.PASS, result.summary
    assert result.evidence["warnings"] == []


def test_each_warning_of_the_plan_is_reported_without_blocking() -> None:
    # A TTL as long as the RTO: clients may keep the old answer for the whole objective.
    text = altered("  max_ttl: 60s\n", "  max_ttl: 15m\n")
    plan = plan_from_text(text, SOURCE)
    result = run_check(plan, "plan.warnings")
    assert result.status is Status.WARN
    assert not result.blocking
    assert [w["code"] for w in result.evidence["warnings"]] == [w.code for w in plan.warnings]
    assert result.evidence["warnings"][0]["path"] == "dns.max_ttl"
    assert "plan validate" in result.remediation
