"""The order `make test` hands files to its workers: the longest first.

pytest-xdist gives each worker whole files (``--dist loadfile``) in collection order, with
``--no-loadscope-reorder`` (its default puts the files with the most tests first: the fuzz
and table files, which take seconds, ahead of the crash matrix, which takes minutes and
then ran last, alone, while the other workers sat idle). The longest files go first, the
short ones fill the end.

The tests marked ``serial`` run after, a few files at a time, ordered by SERIAL_FILES: each
of the long ones on a worker of its own, so that the phase lasts as long as the longest.

The seconds are those of a run on two cores (``--durations=0``, summed by file). A file
missing here or out of date costs minutes of wall time, never a result.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

LONGEST_FILES: dict[str, int] = {
    "tests/takeover/test_crash_matrix.py": 175,
    "tests/takeover/test_failback.py": 153,
    "tests/takeover/test_fence_proof.py": 135,
    "tests/orchestrator/test_serve.py": 129,
    "tests/lab/test_lab_state_dir.py": 98,
    "tests/ui/test_browser.py": 97,
    "tests/takeover/test_drill.py": 94,
    "tests/takeover/test_orphans.py": 91,
    "tests/takeover/test_lease.py": 91,
    "tests/docs/test_tutorial.py": 91,
    "tests/takeover/test_recover.py": 80,
    "tests/notify/test_notify.py": 75,
    "tests/takeover/test_validation_jobs.py": 72,
    "tests/forecast/test_forecast_lab.py": 71,
    "tests/takeover/test_slo.py": 69,
    "tests/test_packaging.py": 65,
    "tests/ui/test_oidc_browser.py": 60,
    "tests/ui/test_incident_page.py": 60,
    "tests/checks/test_identity.py": 57,
    "tests/takeover/test_incident_preflight.py": 55,
    "tests/takeover/test_store_outage.py": 54,
    "tests/capacity/test_carry_lab.py": 54,
    "tests/lab/test_lab.py": 53,
}

# The serial tests of these files (a file's other tests run in the parallel phase).
SERIAL_FILES: dict[str, int] = {
    "tests/orchestrator/test_orchestrator_loss.py": 92,
    "tests/takeover/test_transient_faults.py": 75,
    "tests/deploy/test_target_rbac.py": 66,
}


def longest_first(items: Sequence[pytest.Item]) -> list[pytest.Item]:
    """``items`` with the files of LONGEST_FILES first, longest first; the rest after, in
    the order collected. Within a file the order is kept (a stable sort). A serial test is
    weighed by SERIAL_FILES, since its phase runs only the serial tests."""

    def seconds(item: pytest.Item) -> int:
        table = SERIAL_FILES if item.get_closest_marker("serial") else LONGEST_FILES
        return table.get(item.nodeid.split("::", 1)[0], 0)

    return sorted(items, key=lambda item: -seconds(item))
