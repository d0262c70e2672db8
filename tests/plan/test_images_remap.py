"""images.remap in the plan: which names it maps, how, and the plans it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from drills.errors import PlanError
from drills.plan import plan_from_text

VALID = (Path(__file__).parent / "plans" / "valid.yaml").read_text()


def with_remap(rules: str) -> str:
    return VALID + f"images:\n  remap:\n{rules}"


RULES = (
    '    - {primary: "registry.primary:5000/team/*", dr: "registry.dr/mirror/team/*"}\n'
    '    - {primary: "registry.primary:5000/*", dr: "registry.dr/all/*"}\n'
    '    - {primary: "registry.primary:5000/tools/cli", dr: "registry.dr/cli"}\n'
)


@pytest.mark.parametrize(
    ("image", "at_dr"),
    [
        ("registry.primary:5000/team/app:1.2", "registry.dr/mirror/team/app:1.2"),
        ("registry.primary:5000/team/sub/app@sha256:" + "a" * 64,
         "registry.dr/mirror/team/sub/app@sha256:" + "a" * 64),
        ("registry.primary:5000/other/app:3", "registry.dr/all/other/app:3"),  # first match wins
        ("registry.primary:5000/tools/cli", "registry.dr/all/tools/cli"),  # the subtree is first
        ("registry.elsewhere/team/app:1", None),
        ("registry.primary:5000/teamster/app:1", "registry.dr/all/teamster/app:1"),
    ],
)  # fmt: skip
def test_mapped_names(image: str, at_dr: str | None) -> None:
    plan = plan_from_text(with_remap(RULES))
    assert plan.images.mapped(image) == at_dr


def test_an_exact_rule_maps_one_name_and_keeps_the_tag() -> None:
    plan = plan_from_text(with_remap('    - {primary: "r.p/tools/cli", dr: "r.d/cli"}\n'))
    assert plan.images.mapped("r.p/tools/cli:9") == "r.d/cli:9"
    assert plan.images.mapped("r.p/tools/cli-extra:9") is None


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ('    - {primary: "r.p/team/*", dr: "r.d/team"}\n',
         "images.remap[0].dr: must end in /* exactly when primary does"),
        ('    - {primary: "r.p/*/x", dr: "r.d/*"}\n', "images.remap[0].primary: must be an image"),
        ('    - {primary: "r.p/a/*", dr: "r.d/a/*"}\n    - {primary: "r.p/a/*", dr: "r.d/b/*"}\n',
         "images.remap[1].primary: duplicate"),
    ],
)  # fmt: skip
def test_bad_rules_are_refused_at_their_field(rules: str, message: str) -> None:
    with pytest.raises(PlanError) as raised:
        plan_from_text(with_remap(rules), "plan.yaml")
    [problem] = raised.value.problems
    assert message in f"{problem.path}: {problem.message}"


def test_the_digest_of_a_plan_without_the_later_fields_is_as_before() -> None:
    """images, secrets.store, secret_store and the objects' provider came later: at their
    defaults they stay out of the digest, so an unchanged plan file keeps its runs' digest."""
    from drills.plan import loader

    plain = plan_from_text(VALID)
    dumped = loader._without_later_defaults(plain.model_dump(mode="json"))
    assert "images" not in dumped and "store" not in dumped["secrets"]
    for site in dumped["sites"].values():
        assert "secret_store" not in site
        assert not {"provider", "settings"} & site["objects"].keys()
    remapped = plan_from_text(with_remap('    - {primary: "r.p/a/*", dr: "r.d/a/*"}\n'))
    assert loader.plan_digest(remapped) != loader.plan_digest(plain)
    again = plan_from_text(with_remap('    - {primary: "r.p/a/*", dr: "r.d/b/*"}\n'))
    assert loader.plan_digest(again) != loader.plan_digest(remapped)
