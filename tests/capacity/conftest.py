"""A lab of this package's own: its tests scale work up at DR, which the shared lab forbids."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from drills_lab.runtime import LabInfo
from tests.support.services import own_lab, require_system_binary


@pytest.fixture(scope="session")
def capacity_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    require_system_binary("prometheus", "prometheus")
    with own_lab(tmp_path_factory, "capacity-lab", ready_delay=0.2) as info:
        yield info
