"""The way back's summaries name the site production goes home to, not the forward words."""

from __future__ import annotations

import pytest

from drills.checks.areas.wayback import homeward


@pytest.mark.parametrize(
    ("forward", "way_back"),
    [
        ("3 images of 2 workloads are at DR with the primary's digest",
         "3 images of 2 workloads are at the primary with DR's digest"),
        ("no GPU nodes at DR, but the primary has some",
         "no GPU nodes at the primary, but DR has some"),
        ("1 dataset at DR: 5 primary objects match",
         "1 dataset at the primary: 5 DR objects match"),
        ("The primary registry r.example lacks team/app:1",
         "DR registry r.example lacks team/app:1"),
        ("all 4 secrets identical at DR", "all 4 secrets identical at the primary"),
        # Words that merely contain a site's name are left alone.
        ("DRAM and primaryKey stay", "DRAM and primaryKey stay"),
    ],
)  # fmt: skip
def test_each_site_is_named_for_what_it_is_on_the_way_back(forward: str, way_back: str) -> None:
    assert homeward(forward) == way_back
