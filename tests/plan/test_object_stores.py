"""A dataset on another object store of each site (sites.*.object_stores, datasets[].store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from drills.errors import PlanError
from drills.plan import loader, plan_from_text
from drills.targets.providers import unusable

VALID = yaml.safe_load((Path(__file__).parent / "plans" / "valid.yaml").read_text())
AZURE = {"provider": "azure-blob", "settings": {"account_url": "https://a.blob.example",
                                               "account_key": "env:AZURE_KEY"}}  # fmt: skip


def with_store(stores: dict[str, dict[str, Any]], store: str = "azure") -> dict[str, Any]:
    data = yaml.safe_load(yaml.safe_dump(VALID))
    for role, store_of_site in stores.items():
        data["sites"][role]["object_stores"] = store_of_site
    data["datasets"][0]["store"] = store
    return data


def test_a_dataset_names_a_store_of_both_sites() -> None:
    plan = plan_from_text(yaml.safe_dump(with_store({"primary": {"azure": AZURE},
                                                     "dr": {"azure": AZURE}})))  # fmt: skip
    ds = plan.datasets[0]
    assert plan.sites.dr.objects_for(ds.store).provider == "azure-blob"
    assert plan.sites.dr.objects_for(None) is plan.sites.dr.objects
    assert loader.plan_digest(plan) != loader.plan_digest(plan_from_text(yaml.safe_dump(VALID)))
    assert unusable(plan) == []


def test_a_store_missing_at_a_site_is_refused_at_the_dataset() -> None:
    with pytest.raises(PlanError) as raised:
        plan_from_text(yaml.safe_dump(with_store({"primary": {"azure": AZURE}})), "plan.yaml")
    [problem] = raised.value.problems
    assert f"{problem.path}: {problem.message}" == (
        "datasets[0].store: no object store 'azure' in sites.dr.object_stores"
    )


def test_an_uninstalled_provider_of_a_store_is_named() -> None:
    other = {**AZURE, "provider": "no-such-blobs"}
    plan = plan_from_text(yaml.safe_dump(with_store({"primary": {"azure": other},
                                                     "dr": {"azure": AZURE}})))  # fmt: skip
    [(field, line)] = unusable(plan)
    assert field == "sites.primary.object_stores.azure.provider"
    assert "'no-such-blobs' is not installed" in line and "azure-blob" in line


def test_without_them_the_digest_is_as_before() -> None:
    dumped = loader._without_later_defaults(
        plan_from_text(yaml.safe_dump(VALID)).model_dump(mode="json")
    )
    assert all("object_stores" not in site for site in dumped["sites"].values())
    assert all("store" not in ds for ds in dumped["datasets"])
