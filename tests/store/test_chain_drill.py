"""The chain under a real takeover on the lab: a drill and readiness runs writing to one
SQLite store at once leave one gapless chain that verifies, every record sealed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from drills.checks.readiness import run_readiness
from drills.store.chain_report import run_evidence
from drills.store.chain_verify import verify_store
from drills.store.history import HistoryStore
from drills.takeover.drill import Drill, DrillRequest
from drills_lab.runtime import LabInfo
from tests.support.drill import lab_plan
from tests.support.services import own_lab


@pytest.fixture(scope="module")
def chain_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    with own_lab(tmp_path_factory, "chain-lab", ready_delay=0.3) as info:
        yield info


def test_a_drill_and_readiness_writing_at_once_keep_one_chain(
    chain_lab: LabInfo, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'history.db'}"
    history = HistoryStore(url)
    plan = lab_plan(chain_lab)
    errors: list[BaseException] = []
    stop = threading.Event()
    snapshots = 0

    def readiness() -> None:  # a store of its own, as the scheduled flow has
        nonlocal snapshots
        store = HistoryStore(url)
        try:
            while not stop.is_set() or snapshots < 2:
                run_readiness(plan, history=store)
                snapshots += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            store.close()

    thread = threading.Thread(target=readiness)
    thread.start()
    try:
        request = DrillRequest(plan, operator="tests", reason="ci", tier_deadline_s=20)
        result = Drill(request, history).run()
    finally:
        stop.set()
        thread.join(120)
    try:
        assert not errors, errors
        assert result.status == "succeeded", result.error
        report = verify_store(history)
        assert report.ok, report.first_problem
        assert report.open_runs == 0 and report.pre_chain == 0
        [chain] = report.plans
        links = run_evidence(history, result.run_id)
        kinds = {link.kind for link in links}
        assert kinds == {"run", "step", "journal"}
        assert links[-1].kind == "run"
        ended = sum(len(p.steps) for p in result.timeline.phases)
        assert sum(1 for link in links if link.kind == "step") >= ended
        seqs = sorted(link.seq for link in links)
        assert seqs[-1] <= chain.links and len(set(seqs)) == len(seqs)
        assert chain.records >= snapshots + ended
    finally:
        history.close()
