"""The suite's order: the longest files first, every file's tests kept together and in
their order, the files of a grouped session lab in one unit, the serial session ordered by
its own seconds, and every file it names still there. A grouped lab stops once no test
that follows names it."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast

from drills_lab.runtime import LabInfo
from tests.support.lab_groups import GROUPED_LABS, LabGroups, labs_named_in
from tests.support.ordering import LONGEST_FILES, SERIAL_FILES, UnitScheduling, longest_first
from tests.support.ui import ROOT


@dataclass(frozen=True)
class Item:
    nodeid: str
    serial: bool = False

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "serial" and self.serial else None


def order(*items: Item) -> list[str]:
    return [i.nodeid for i in longest_first(cast(Any, list(items)), ROOT)]


def test_every_file_the_order_names_exists() -> None:
    missing = [name for name in [*LONGEST_FILES, *SERIAL_FILES] if not (ROOT / name).is_file()]
    assert missing == [], "rename or drop these in tests/support/ordering.py"


def test_every_file_of_the_serial_order_has_serial_tests() -> None:
    for name in SERIAL_FILES:
        assert "mark.serial" in (ROOT / name).read_text(), f"{name} has no serial test"


def test_the_longest_files_come_first_and_each_file_stays_in_order() -> None:
    longest, second = list(LONGEST_FILES)[:2]
    assert order(
        Item("tests/a/test_fuzz.py::test_one[1]"),
        Item(f"{second}::test_b"),
        Item("tests/a/test_fuzz.py::test_one[2]"),
        Item(f"{longest}::test_z"),
        Item(f"{second}::test_a"),
        Item("tests/b/test_quick.py::test_it"),
    ) == [
        f"{longest}::test_z",
        f"{second}::test_b",
        f"{second}::test_a",
        "tests/a/test_fuzz.py::test_one[1]",
        "tests/a/test_fuzz.py::test_one[2]",
        "tests/b/test_quick.py::test_it",
    ]


def test_serial_tests_are_weighed_by_the_serial_order_alone() -> None:
    """A file long in the parallel phase whose serial tests are short (not in SERIAL_FILES)
    goes after the long serial files, so that no two of those share a worker."""
    longest_serial, second_serial = list(SERIAL_FILES)[:2]
    parallel_long = next(name for name in LONGEST_FILES if name not in SERIAL_FILES)
    assert order(
        Item(f"{parallel_long}::test_short_and_serial", serial=True),
        Item(f"{second_serial}::test_b", serial=True),
        Item(f"{longest_serial}::test_a", serial=True),
    ) == [
        f"{longest_serial}::test_a",
        f"{second_serial}::test_b",
        f"{parallel_long}::test_short_and_serial",
    ]


# Named through GROUPED_LABS only: a file that names a grouped lab joins its unit.
FIRST, SECOND = GROUPED_LABS[:2]


def files_naming(lab: str) -> list[str]:
    return sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if labs_named_in(path)[:1] == (lab,)
    )


def test_the_files_of_a_grouped_lab_are_one_unit_next_to_each_other() -> None:
    first, second = files_naming(SECOND)[:2]
    alone = "tests/b/test_quick.py"
    ordered = order(Item(f"{first}::test_a"), Item(f"{alone}::test_it"), Item(f"{second}::test_b"))
    assert ordered in (
        [f"{first}::test_a", f"{second}::test_b", f"{alone}::test_it"],
        [f"{alone}::test_it", f"{first}::test_a", f"{second}::test_b"],
    )
    scheduler = object.__new__(UnitScheduling)
    scheduler.config = cast(Any, SimpleNamespace(rootpath=ROOT))
    scopes = {scheduler._split_scope(n) for n in (f"{first}::test_a", f"{second}::test_b[1]")}
    assert len(scopes) == 1 and scheduler._split_scope(f"{alone}::test_it") == alone


def test_every_grouped_lab_has_files_and_a_fixture() -> None:
    fixtures = (ROOT / "tests" / "conftest.py").read_text() + (
        ROOT / "tests" / "capacity" / "conftest.py"
    ).read_text()
    for lab in GROUPED_LABS:
        assert files_naming(lab), f"no test file names {lab}"
        assert re.search(rf'lab_groups\.get\(\s*"{lab}"', fixtures), f"no fixture starts {lab}"


def test_a_grouped_lab_starts_once_and_stops_when_no_longer_named() -> None:
    events: list[str] = []

    @contextlib.contextmanager
    def start(name: str, **options: Any) -> Iterator[LabInfo]:
        events.append(f"up {name} {options}")
        try:
            yield cast(LabInfo, SimpleNamespace(state_dir=name))
        finally:
            events.append(f"down {name}")

    groups = LabGroups(start)
    first = groups.get(SECOND, drift=True)
    assert groups.get(SECOND, drift=True) is first
    prepared: list[str] = []
    groups.get(FIRST, lambda info: prepared.append(info.state_dir))
    groups.stop_all_but((FIRST,))
    groups.stop_all_but((FIRST,))
    dashed = FIRST.replace("_", "-"), SECOND.replace("_", "-")
    assert events == [
        f"up {dashed[1]} {{'drift': True}}",
        f"up {dashed[0]} {{}}",
        f"down {dashed[1]}",
    ]
    assert prepared == [dashed[0]]
    groups.stop_all_but(())
    assert events[-1] == f"down {dashed[0]}"


def test_a_lab_whose_preparation_fails_is_stopped() -> None:
    events: list[str] = []

    @contextlib.contextmanager
    def start(name: str, **options: Any) -> Iterator[LabInfo]:
        events.append("up")
        try:
            yield cast(LabInfo, SimpleNamespace(state_dir=name))
        finally:
            events.append("down")

    def fail(info: LabInfo) -> None:
        raise RuntimeError("never ready")

    groups = LabGroups(start)
    with contextlib.suppress(RuntimeError):
        groups.get(FIRST, fail)
    assert events == ["up", "down"]
