"""A drill on the lab whose plan adds a dataset on Azure Blob Storage (Azurite) beside the
lab's datasets on S3 (moto): RPO is measured on both, and the report gives both."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.storage.blob import RetentionPolicy

from drills.store.history import HistoryStore
from drills.takeover.drill import Drill, DrillRequest
from drills_lab import topology
from drills_lab.runtime import LabInfo
from tests.support.azurite import ACCOUNT_KEY, KEY_ENV, AzuriteServer
from tests.support.drill import drills_cli, lab_plan, snapshot
from tests.support.services import own_lab

AZURE_DATASET = "azure-features"
PRIMARY, DR = "features-primary", "features-dr"


@pytest.fixture(scope="module")
def azure_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    """A lab of its own: a drill changes it (and must put it back)."""
    with own_lab(tmp_path_factory, "azure-drill-lab", ready_delay=0.2) as info:
        yield info


@pytest.fixture(scope="module")
def protected_azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzuriteServer]:
    """An Azurite account of its own with blob soft delete kept 30 days (what add-only asks
    of an Azure account without versioning), and the dataset's two containers in sync."""
    server = AzuriteServer(tmp_path_factory.mktemp("azurite-drill"))
    server.start()
    try:
        client = server.client()
        client.set_service_properties(
            delete_retention_policy=RetentionPolicy(enabled=True, days=30)
        )
        for name in (PRIMARY, DR):
            container = client.create_container(name)
            for i in range(3):
                container.upload_blob(f"v1/part-{i}.parquet", f"features {i}".encode())
        yield server
    finally:
        server.stop()


@pytest.fixture()
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'history.db'}"


def with_azure_dataset(server: AzuriteServer) -> Any:
    def change(data: dict[str, Any]) -> None:
        for role in ("primary", "dr"):
            data["sites"][role]["object_stores"] = {
                "azure": {"provider": "azure-blob", "settings": server.settings()}
            }
        data["datasets"].append(
            {
                "name": AZURE_DATASET,
                "kind": "data",
                "store": "azure",
                "primary_bucket": PRIMARY,
                "dr_bucket": DR,
                "prefix": "v1/",
                "rpo_target": "1h",
            }
        )

    return change


def test_a_drill_measures_rpo_on_azure_and_s3_datasets(
    azure_lab: LabInfo,
    protected_azurite: AzuriteServer,
    history: HistoryStore,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(KEY_ENV, ACCOUNT_KEY)
    plan = lab_plan(azure_lab, with_azure_dataset(protected_azurite))
    before = snapshot(plan)
    request = DrillRequest(plan, operator="tests", reason="azure and s3", tier_deadline_s=20)
    result = Drill(request, history).run()
    assert result.status == "succeeded", result.error
    assert snapshot(plan) == before
    m = result.measurement
    assert m is not None
    names = {d.name for d in topology.DATASETS} | {AZURE_DATASET}
    assert set(m.rpo_seconds) == names
    assert m.rpo_seconds[AZURE_DATASET] == 0.0  # both containers hold the same blobs
    assert all(isinstance(m.rpo_seconds[d.name], float) for d in topology.DATASETS)
    stored = history.get_run(result.run_id)
    assert stored is not None
    checks = {r["id"]: r for r in stored.readiness["results"]}
    rpo_rows = {r["name"] for r in checks["data.rpo"]["evidence"]["datasets"]}
    assert rpo_rows == names and checks["data.rpo"]["status"] == "pass"
    assert checks["data.delete_protection"]["status"] == "pass"
    canaries = checks["data.dr_writable"]["evidence"]["buckets"]
    assert ("azure", DR) in {(r.get("store"), r["bucket"]) for r in canaries}
    assert ACCOUNT_KEY not in json.dumps(stored.readiness)

    report = json.loads(drills_cli("report", result.run_id, "--format", "json", db=db_url).stdout)
    assert set(report["rpo_seconds"]) == names
    markdown = drills_cli("report", result.run_id, db=db_url).stdout
    assert AZURE_DATASET in markdown and "training-data" in markdown
    assert ACCOUNT_KEY not in markdown
