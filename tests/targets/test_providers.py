"""The providers drills finds: its own from its entry points, each once, and still when the
metadata of this copy of drills lacks them."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from drills.targets import providers
from drills.targets.providers import BUILT_IN, ProviderUnusableError, find, installed

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"


def test_the_built_in_table_is_what_pyproject_registers() -> None:
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["drills.providers"]
    assert declared == BUILT_IN


def test_each_built_in_provider_is_found_once_from_the_installed_metadata() -> None:
    found = [i for i in installed(refresh=True) if i.package == "drills"]
    assert sorted(i.name for i in found) == sorted(BUILT_IN)
    assert all(i.provider is not None for i in found), [i.error for i in found]


def test_a_copy_of_drills_without_its_metadata_still_has_its_own_providers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Run from a source tree, or installed before it had providers: no entry points at all."""
    monkeypatch.setattr(providers, "distributions", lambda: [])
    try:
        found = installed(refresh=True)
        assert {i.name: i.package for i in found} == dict.fromkeys(BUILT_IN, "drills")
        assert find("dns", "rfc2136").switch
        with pytest.raises(ProviderUnusableError) as refused:
            find("dns", "s3")
        assert str(refused.value) == (
            "dns provider 's3': is a provider of objects, not of dns; "
            "installed dns providers: external-dns, rfc2136, route53"
        )
    finally:
        monkeypatch.undo()
        installed(refresh=True)


def test_a_site_served_by_other_providers_is_described_by_their_names() -> None:
    """`drills plan show` and the Plans page name the provider, never its settings."""
    import yaml

    from drills.plan import plan_from_text
    from drills.plan.describe import describe_site

    doc = yaml.safe_load((Path(__file__).parents[1] / "plan" / "plans" / "valid.yaml").read_text())
    doc["sites"]["dr"]["objects"] = {"provider": "blobs", "settings": {"account": "usw2"}}
    doc["sites"]["dr"]["registry"] = {"provider": "harbor-robot", "settings": {"project": "p"}}
    site = plan_from_text(yaml.safe_dump(doc)).sites.dr
    described = describe_site(site)
    assert (described["registry"], described["object storage"]) == (
        "provider harbor-robot",
        "provider blobs",
    )
    assert "usw2" not in str(described) and "project" not in str(described)
