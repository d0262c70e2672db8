"""The parallel suite's order: the longest files first, every file's tests kept together
and in their order, and every file it names still there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from tests.support.ordering import LONGEST_FILES, longest_first
from tests.support.ui import ROOT


@dataclass(frozen=True)
class Item:
    nodeid: str


def test_every_file_the_order_names_exists() -> None:
    missing = [name for name in LONGEST_FILES if not (ROOT / name).is_file()]
    assert missing == [], "rename or drop these in tests/support/ordering.py"


def test_the_longest_files_come_first_and_each_file_stays_in_order() -> None:
    longest, second = list(LONGEST_FILES)[:2]
    collected = [
        Item("tests/a/test_fuzz.py::test_one[1]"),
        Item(f"{second}::test_b"),
        Item("tests/a/test_fuzz.py::test_one[2]"),
        Item(f"{longest}::test_z"),
        Item(f"{second}::test_a"),
        Item("tests/b/test_quick.py::test_it"),
    ]
    ordered = [i.nodeid for i in longest_first(cast(Any, collected))]
    assert ordered == [
        f"{longest}::test_z",
        f"{second}::test_b",
        f"{second}::test_a",
        "tests/a/test_fuzz.py::test_one[1]",
        "tests/a/test_fuzz.py::test_one[2]",
        "tests/b/test_quick.py::test_it",
    ]
