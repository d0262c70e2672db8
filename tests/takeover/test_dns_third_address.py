"""A DNS record at an address the plan does not name: refused before the first change.

The record was switched by hand to a third address (a maintenance page, a typo). A
drill from there once went on, and its rollback "restored" the third address; an
incident would journal it as the value to go back to. Now a drill starts only with the
record at the primary's value, an incident at the primary's or DR's, each refusal names
the address, and no switch moves from or to a value nobody planned.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from drills.errors import StepFailed
from drills.plan import DrillPlan
from drills.store.history import HistoryStore
from drills.takeover.drill import Drill, DrillRequest
from drills.takeover.steps import dns_values
from drills.takeover.steps.dns_values import check_switch, unplanned
from drills.targets.dns import RecordAnswer, dns_for
from drills_lab import topology
from drills_lab.runtime import LabInfo
from tests.support.drill import drills_cli, lab_plan, snapshot
from tests.support.services import own_lab

THIRD = "127.0.0.9"


@pytest.fixture(scope="module")
def third_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    """A lab of its own, its record at a third address while this module runs."""
    with own_lab(tmp_path_factory, "dns-third", ready_delay=0.2) as info:
        plan = lab_plan(info)
        set_record(plan, THIRD)
        yield info


def set_record(plan: DrillPlan, value: str) -> None:
    target = dns_for(plan)
    try:
        target.update(plan.dns.record.name, str(plan.dns.record.type), value, 30)
    finally:
        target.close()


def record_values(plan: DrillPlan) -> set[str]:
    target = dns_for(plan)
    try:
        answers = target.read(plan.dns.record.name, str(plan.dns.record.type))
    finally:
        target.close()
    return {v for a in answers for v in a.values}


@pytest.mark.parametrize("mode", ["drill", "incident"])
def test_a_takeover_from_a_third_address_is_refused_naming_it(
    third_lab: LabInfo, tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An incident reads the record for at most INCIDENT_LOOK_S, then goes on (its switch
    # reads it again): on a machine busy with the rest of the suite the read here must not
    # run out of that time, or the run would go on rather than be refused, as designed.
    monkeypatch.setattr(dns_values, "INCIDENT_LOOK_S", 30.0)
    plan = lab_plan(third_lab)
    before = snapshot(plan)
    history = HistoryStore(f"sqlite:///{tmp_path / 'history.db'}")
    result = Drill(DrillRequest(plan, mode=mode, operator="tests"), history).run()  # type: ignore[arg-type]
    error = result.error or ""
    assert result.status == "aborted", error
    assert f"answers {THIRD}, not {topology.PRIMARY_ADDR} (primary)" in error, error
    assert "the plan does not name" in error
    assert history.journal(result.run_id) == []  # nothing changed, nothing to restore
    assert snapshot(plan) == before
    assert record_values(plan) == {THIRD}  # left where the operator put it, not "restored"


def test_the_cli_refuses_and_says_where_the_record_is(third_lab: LabInfo, tmp_path: Path) -> None:
    plan_file = str(Path(third_lab.state_dir) / "plan.yaml")
    ran = drills_cli("run", plan_file, "--yes", db=f"sqlite:///{tmp_path / 'h.db'}")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert THIRD in ran.stdout and "No change was made" in ran.stdout, ran.stdout
    assert record_values(lab_plan(third_lab)) == {THIRD}


def _answers(*values: str) -> list[RecordAnswer]:
    return [RecordAnswer("127.0.0.1:53", (value,), 30) for value in values]


def test_a_switch_moves_between_planned_values_only(third_lab: LabInfo) -> None:
    """The switch's own guard, for a record changed after the preflight looked."""
    plan = lab_plan(third_lab)
    primary, dr = topology.PRIMARY_ADDR, topology.DR_ADDR
    check_switch(plan, _answers(primary), dr)  # a takeover
    check_switch(plan, _answers(dr), primary)  # a failback
    with pytest.raises(StepFailed, match=f"answers {THIRD}, not {primary} \\(primary\\) or"):
        check_switch(plan, _answers(THIRD), dr)
    with pytest.raises(StepFailed, match=f"the value to write, {THIRD}, is neither site's"):
        check_switch(plan, _answers(dr), THIRD)  # a failback to a journalled third address
    two_values = [RecordAnswer("127.0.0.1:53", (primary, dr), 30)]
    with pytest.raises(StepFailed, match=f"answers {primary}, {dr}, not"):
        check_switch(plan, two_values, dr)


def test_an_incident_may_start_with_the_record_at_either_site(third_lab: LabInfo) -> None:
    plan = lab_plan(third_lab)
    sites = ("primary", "dr")
    assert unplanned(plan, _answers(topology.PRIMARY_ADDR), sites) is None
    assert unplanned(plan, _answers(topology.DR_ADDR), sites) is None
    assert unplanned(plan, _answers(topology.DR_ADDR), ("primary",)) is not None
    # Every server must answer a planned value: one at a third address is enough to refuse.
    mixed = _answers(topology.PRIMARY_ADDR, THIRD)
    assert unplanned(plan, mixed, sites) == (
        f"127.0.0.1:53 answers {THIRD}, not {topology.PRIMARY_ADDR} (primary) or "
        f"{topology.DR_ADDR} (dr)"
    )
