"""Findings open on a failure and close when a later run of the same plan passes."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from drills.evidence.findings import (
    findings,
    findings_of_run,
    fold,
    folded_open_counts,
    open_counts,
    open_findings,
)
from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus
from tests.evidence.support import check, make_run, phase, store_with
from tests.support.drill import drills_cli


def test_a_failed_check_opens_a_finding_until_the_same_check_passes(tmp_path: Path) -> None:
    runs = [
        make_run("r1", days=0, checks=[check("dns-ttl", "fail", "lower the TTL"),
                                       check("images", "pass")]),
        make_run("r2", days=1, checks=[check("dns-ttl", "error")]),
        make_run("r3", days=2, checks=[]),  # no readiness: says nothing
        make_run("r4", days=3, checks=[check("dns-ttl", "pass")]),
    ]  # fmt: skip
    store = store_with(tmp_path, *runs)
    (found,) = findings(store)
    assert (found.kind, found.key, found.opened_run) == ("readiness", "dns-ttl", "r1")
    assert (found.last_seen_run, found.times_seen, found.closed_run) == ("r2", 2, "r4")
    assert found.remediation == "lower the TTL"
    assert not found.open
    assert open_findings(store) == []
    # As r2 ended, it was open.
    run = store.get_run("r2")
    assert run is not None
    assert [f.open for f in findings_of_run(store, run)] == [True]


def test_a_failed_step_is_a_finding_of_its_plan_only(tmp_path: Path) -> None:
    failed = [phase("smoke", ("GET /health", "failed", "HTTP 503"))]
    passed = [phase("smoke", ("GET /health", "ok", "HTTP 200"))]
    store = store_with(
        tmp_path,
        make_run("a1", plan="a", status=RunStatus.ROLLED_BACK, phases=failed),
        make_run("b1", plan="b", days=1, phases=passed),  # another plan: closes nothing
        make_run("a2", plan="a", days=2, dry_run=True,
                 phases=[phase("smoke", ("GET /health", "planned", ""))]),
    )  # fmt: skip
    (found,) = open_findings(store)
    assert (found.plan, found.kind, found.key) == ("a", "step", "smoke / GET /health")
    assert found.detail == "HTTP 503"
    store.create_run(make_run("a3", plan="a", days=3, phases=passed))
    assert open_findings(store) == []
    assert open_findings(store, "a") == []


def test_a_finding_that_comes_back_is_a_new_one() -> None:
    fail, ok = check("c", "fail"), check("c", "pass")
    found = fold([make_run(f"r{i}", days=i, checks=[c]) for i, c in enumerate([fail, ok, fail])])
    assert [(f.opened_run, f.open) for f in found] == [("r0", False), ("r2", True)]
    assert found[0].id != found[1].id


def test_a_succeeded_drill_is_never_its_own_never_drilled_finding() -> None:
    never = check("drill.cadence", "fail")
    found = fold([
        make_run("r0", status=RunStatus.FAILED, checks=[never]),  # opens it
        make_run("r1", days=1, checks=[never]),  # the drill that succeeded closes it
        make_run("r2", days=2, checks=[never]),  # and opens none of its own
    ])  # fmt: skip
    assert [(f.opened_run, f.closed_run) for f in found] == [("r0", "r1")]


def test_the_open_counts_the_database_gives_are_those_of_the_fold(history: HistoryStore) -> None:
    """The statement of each backend (SQLite's json_each, PostgreSQL's jsonb) against the
    fold in Python, over the shapes that could set them apart."""
    failed, ok = ("GET /health", "failed", "HTTP 503"), ("GET /health", "ok", "HTTP 200")
    nameless = check("x", "fail") | {"id": None}
    runs = [
        make_run("a1", plan="a", checks=[check("dns", "fail"), check("images", "fail"), nameless],
                 phases=[phase("smoke", failed), phase("fence", failed)]),
        make_run("a2", plan="a", days=1, checks=[check("dns", "error"), check("images", "pass")],
                 phases=[phase("smoke", ok), {"name": "no steps"}]),
        # The same check twice in one run: its last word counts.
        make_run("a3", plan="a", days=2, checks=[check("dns", "pass"), check("dns", "fail")]),
        make_run("b1", plan="b", checks=[check("dns", "fail")], phases=[phase("smoke", failed)]),
        make_run("b2", plan="b", days=1, checks=[check("dns", "pass"), check("images", "warn")],
                 phases=[phase("smoke", ok)]),
        make_run("c1", plan="c", checks=[check("dns", "fail")], phases=[]),
        # The cadence a succeeded drill answers by itself; a failed or dry one does not.
        make_run("d1", plan="d", checks=[check("drill.cadence", "fail")]),
        make_run("e1", plan="e", status=RunStatus.FAILED, checks=[check("drill.cadence", "fail")]),
        make_run("f1", plan="f", dry_run=True, checks=[check("drill.cadence", "fail")]),
        make_run("g1", plan="g", mode=Mode.INCIDENT, checks=[check("drill.cadence", "fail")]),
        make_run("c2", plan="c", days=1, dry_run=True,
                 phases=[phase("smoke", ("GET /health", "planned", ""))]),
    ]  # fmt: skip
    for run in runs:
        history.create_run(run)
    nothing = make_run("c3", plan="c", days=2)
    nothing.readiness, nothing.timeline = {"results": None}, [{"name": "p", "steps": None}]
    history.create_run(nothing)
    plans = ["a", "b", "c", "d", "e", "f", "g", "never-run"]
    # a: dns, None, fence / GET /health; b: all passed since; d: drilled, so not overdue
    expected = {"a": 3, "c": 1, "e": 1, "f": 1, "g": 1}
    assert folded_open_counts(history, plans) == expected
    assert open_counts(history, plans) == expected
    assert Counter(f.plan for f in open_findings(history)) == expected
    assert open_counts(history, ["b"]) == {} and open_counts(history, []) == {}


def test_drills_report_ends_with_the_findings_as_the_run_ended(tmp_path: Path) -> None:
    store = store_with(
        tmp_path,
        make_run("r1", days=0, checks=[check("dns-ttl", "fail", "lower the TTL")]),
        make_run("r2", days=1, checks=[check("dns-ttl", "pass")]),
    )
    store.close()
    db = f"sqlite:///{tmp_path}/history.db"
    first = drills_cli("report", "r1", db=db)
    assert first.returncode == 0, first.stderr
    assert "Issues found and remediation" in first.stdout
    assert "readiness: dns-ttl" in first.stdout and "lower the TTL" in first.stdout
    assert "| open |" in first.stdout
    closed = json.loads(drills_cli("report", "r2", "--format", "json", db=db).stdout)
    assert [(f["key"], f["open"], f["closed_run"]) for f in closed["findings"]] == [
        ("dns-ttl", False, "r2")
    ]
