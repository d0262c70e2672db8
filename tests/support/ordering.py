"""The order `make test` hands work to its workers: the longest first.

pytest-xdist gives each worker whole work units (``--dist loadfile``) in collection order,
with ``--no-loadscope-reorder`` (its default puts the units with the most tests first: the
fuzz and table files, which take seconds, ahead of the crash matrix, which takes minutes and
then ran last, alone, while the other workers sat idle). A work unit is a file, or the
files that share one of the session labs of ``tests.support.lab_groups``, which then runs on
one worker only and stops after them (UnitScheduling). The longest units go first, the
short ones fill the end.

The tests marked ``serial`` run in a session of their own beside the others (Makefile), a
few files at a time, ordered by SERIAL_FILES: each of the long ones on a worker of its own,
so that the session lasts as long as the longest.

The seconds are those of a run of `make test` on two cores (each test's setup, call and
teardown, summed by file; a grouped lab's start counts in the file that starts it), for the
files of 15 s or more. A file missing here or out of date costs wall time at the end, when the
other workers are done, never a result.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from xdist.scheduler import LoadFileScheduling

from tests.support.lab_groups import labs_named_in

LONGEST_FILES: dict[str, int] = {
    "tests/takeover/test_crash_matrix.py": 320,
    "tests/takeover/test_failback.py": 184,
    "tests/orchestrator/test_serve.py": 170,
    "tests/ui/test_browser.py": 158,
    "tests/takeover/test_fence_proof.py": 154,
    "tests/takeover/test_drill.py": 117,
    "tests/notify/test_notify.py": 98,
    "tests/takeover/test_orphans.py": 95,
    "tests/lab/test_lab_state_dir.py": 91,
    "tests/takeover/test_recover.py": 89,
    "tests/docs/test_tutorial.py": 88,
    "tests/takeover/test_lease.py": 81,
    "tests/test_packaging.py": 70,
    "tests/checks/test_identity.py": 66,
    "tests/takeover/test_slo.py": 63,
    "tests/forecast/test_forecast_lab.py": 61,
    "tests/store/test_prune.py": 61,
    "tests/ui/test_oidc_browser.py": 61,
    "tests/capacity/test_carry_lab.py": 56,
    "tests/takeover/test_validation_jobs.py": 55,
    "tests/takeover/test_store_outage.py": 54,
    "tests/safety/test_leak.py": 53,
    "tests/lab/test_lab.py": 52,
    "tests/checks/test_untrusted_answers.py": 51,
    "tests/takeover/test_carry_drill.py": 42,
    "tests/ui/test_declare_page.py": 41,
    "tests/takeover/test_incident_preflight.py": 40,
    "tests/takeover/test_applications.py": 36,
    "tests/flows/test_flow_drill.py": 35,
    "tests/store/test_prune_forecast.py": 32,
    "tests/ui/test_incident_page.py": 32,
    "tests/store/test_chain.py": 31,
    "tests/takeover/test_practice.py": 31,
    "tests/ui/test_browser_proposal.py": 28,
    "tests/takeover/test_external_dns.py": 26,
    "tests/takeover/test_preemption.py": 24,
    "tests/takeover/test_cancel.py": 24,
    "tests/checks/test_readiness.py": 24,
    "tests/ui/test_websocket_access.py": 23,
    "tests/evidence/test_hostile_pack.py": 18,
    "tests/ui/test_prefect_pages.py": 18,
    "tests/store/test_chain_drill.py": 18,
    "tests/ui/test_fleet_page.py": 17,
    "tests/flows/test_flow_only.py": 17,
    "tests/ui/test_evidence_pages.py": 17,
    "tests/takeover/test_dns_third_address.py": 17,
    "tests/takeover/test_drill_azure.py": 17,
}

# The serial tests of these files (a file's other tests run in the parallel phase).
SERIAL_FILES: dict[str, int] = {
    "tests/orchestrator/test_orchestrator_loss.py": 108,
    "tests/takeover/test_transient_faults.py": 81,
    "tests/deploy/test_target_rbac.py": 65,
}


def work_unit(file: str, root: Path) -> str:
    """The unit a test file runs in: its grouped lab's, or its own."""
    labs = labs_named_in(root / file)
    return f"the files of {labs[0]}" if labs else file


def longest_first(items: Sequence[pytest.Item], root: Path) -> list[pytest.Item]:
    """``items`` by work unit, the longest units first (a unit weighs what its files of
    LONGEST_FILES do), then in the order collected; in a unit, its files longest first;
    in a file, the order kept. A serial test is weighed by SERIAL_FILES, since its phase
    runs only the serial tests."""

    def file_of(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[0]

    def seconds(item: pytest.Item) -> int:
        table = SERIAL_FILES if item.get_closest_marker("serial") else LONGEST_FILES
        return table.get(file_of(item), 0)

    file_seconds: dict[str, int] = {}
    for item in items:
        file_seconds.setdefault(file_of(item), seconds(item))
    unit_seconds: dict[str, int] = {}
    for file, weight in file_seconds.items():
        unit = work_unit(file, root)
        unit_seconds[unit] = unit_seconds.get(unit, 0) + weight
    first_seen = {unit: n for n, unit in enumerate(unit_seconds)}

    def key(item: pytest.Item) -> tuple[int, int, int]:
        unit = work_unit(file_of(item), root)
        return -unit_seconds[unit], first_seen[unit], -file_seconds[file_of(item)]

    return sorted(items, key=key)


class UnitScheduling(LoadFileScheduling):
    """``--dist loadfile`` whose units are those of :func:`work_unit`."""

    def _split_scope(self, nodeid: str) -> str:
        return work_unit(super()._split_scope(nodeid), self.config.rootpath)
