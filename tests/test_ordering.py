"""The suite's order: the longest files first, every file's tests kept together and in
their order, the serial phase ordered by its own seconds, and every file it names still
there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from tests.support.ordering import LONGEST_FILES, SERIAL_FILES, longest_first
from tests.support.ui import ROOT


@dataclass(frozen=True)
class Item:
    nodeid: str
    serial: bool = False

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "serial" and self.serial else None


def order(*items: Item) -> list[str]:
    return [i.nodeid for i in longest_first(cast(Any, list(items)))]


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
