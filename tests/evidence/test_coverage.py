"""Coverage per plan, and the line a compliance officer reads."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from drills.cli import app
from drills.evidence.coverage import ChainStatus, Period, coverage_markdown, coverage_over
from drills.store.kinds import Mode, RunStatus
from tests.evidence.support import BASE, check, make_run, phase, store_with

NOW = BASE + dt.timedelta(days=30)


def test_periods() -> None:
    assert Period.parse("12m").start(dt.datetime(2026, 3, 31, tzinfo=dt.UTC)) == dt.datetime(
        2025, 3, 31, tzinfo=dt.UTC
    )
    assert Period.parse("1m").start(dt.datetime(2026, 3, 31, tzinfo=dt.UTC)).day == 28
    assert Period.parse("2w").start(NOW) == NOW - dt.timedelta(days=14)
    assert Period.parse("1y").start(NOW) == NOW.replace(year=NOW.year - 1)
    assert str(Period.parse("12m")) == "12 months"
    for bad in ("12", "0m", "m", "12h", "-1d"):
        with pytest.raises(ValueError):
            Period.parse(bad)


def _verifies(_store: object) -> ChainStatus:
    return ChainStatus(True, "the history verifies")


def test_coverage_per_plan(tmp_path: Path) -> None:
    store = store_with(
        tmp_path,
        make_run("p1", plan="payments-us", days=1),
        make_run("g1", plan="gpu", days=2, checks=[check("quota", "fail")],
                 phases=[phase("smoke", ("GET /", "ok", ""))]),  # no failback phase
        make_run("i1", plan="gpu", days=3, mode=Mode.INCIDENT),
        make_run("old", plan="payments-eu", days=-400),  # drilled, but long ago
        make_run("f1", plan="payments-eu", days=4, status=RunStatus.ROLLED_BACK),
    )  # fmt: skip
    report = coverage_over(store, ["payments-eu", "batch"], Period.parse("12m"),
                      chain=_verifies, now=NOW)  # fmt: skip
    rows = {p.plan: p for p in report.plans}
    assert list(rows) == ["batch", "gpu", "payments-eu", "payments-us"]
    assert report.headline() == (
        "2 of 4 plans drilled in the last 12 months; batch and payments-eu have not been."
    )
    assert rows["payments-us"].drilled and rows["payments-us"].failback_drilled
    assert rows["gpu"].drilled and not rows["gpu"].failback_drilled
    assert rows["gpu"].incidents == 1 and rows["gpu"].open_findings == 1
    assert not rows["payments-eu"].drilled
    assert rows["payments-eu"].last_drill == make_run("x", days=-400).started_at.isoformat()
    assert rows["batch"].last_drill is None
    assert all(p.chain == "verifies" for p in report.plans)
    text = coverage_markdown(report)
    assert text.splitlines()[2] == f"**{report.headline()}**"
    assert "| gpu | yes |" in text


def test_one_plan_not_drilled_reads_as_one(tmp_path: Path) -> None:
    store = store_with(tmp_path, make_run("p1", plan="a", days=1))
    broken = ChainStatus(False, "the history does NOT verify: b: run x changed", {"b": "..."})
    report = coverage_over(store, ["b"], Period.parse("90d"), chain=lambda _: broken, now=NOW)
    assert report.headline() == "1 of 2 plans drilled in the last 90 days; b has not been."
    assert [p.chain for p in report.plans] == ["verifies", "does NOT verify"]


def test_a_plan_file_that_cannot_be_read_is_a_finding(tmp_path: Path) -> None:
    store = store_with(tmp_path, make_run("p1", plan="payments-eu", days=1))
    db = store.url
    store.close()
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    missing = tmp_path / "gone.yaml"

    def coverage_cli(plans: str, *more: str) -> Result:
        args = ["evidence", "coverage", "--plans", plans, "--db", db, *more]
        return CliRunner().invoke(app, args, env={"COLUMNS": "250"})

    # Without the broken file, the one plan drilled is the whole story: exit 0.
    fine = coverage_cli(str(tmp_path / "none-*.yaml"))
    assert fine.exit_code == 0, fine.output
    assert "1 of 1 plans drilled" in fine.stdout
    result = coverage_cli(f"{broken},{missing}")
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 1, result.output
    # Counted in the headline (an unreadable plan is not known to be drilled) and listed.
    assert result.stdout.splitlines()[2].startswith("**1 of 3 plans drilled in the last 12 ")
    assert "Plan files that cannot be read" in result.stdout
    assert f"✗ {missing}: cannot be read" in result.stderr
    as_json = coverage_cli(f"{broken},{missing}", "--format", "json")
    assert as_json.exit_code == 1
    report = json.loads(as_json.stdout)
    assert [u["path"] for u in report["unreadable_plans"]] == [str(broken), str(missing)]
    assert report["headline"] == (
        f"1 of 3 plans drilled in the last 12 months; {broken} and {missing} cannot be read "
        "as plans."
    )
