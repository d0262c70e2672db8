"""The Data checks over a plan with one dataset on S3 (moto) and one on Azure Blob (Azurite)."""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from drills.checks.base import CheckResult, Status
from drills.plan import DrillPlan, plan_from_text
from drills_lab.moto_server import MotoServer
from tests.checks.test_data import both, dataset, plan_doc, row
from tests.support.azurite import ACCOUNT_KEY, AzuriteServer
from tests.support.checks import run_check as run

pytestmark = pytest.mark.usefixtures("aws_env")

READ_CHECKS = ("data.replicated", "data.rpo", "data.dr_writable")


def containers(server: AzuriteServer) -> tuple[str, str]:
    names = (f"az-p-{uuid.uuid4().hex[:10]}", f"az-d-{uuid.uuid4().hex[:10]}")
    for name in names:
        server.client().create_container(name)
    return names


def upload(server: AzuriteServer, bucket: str, key: str, body: bytes) -> None:
    server.client().get_blob_client(bucket, key).upload_blob(body, overwrite=True)


def mixed_plan(
    moto: MotoServer,
    s3_pair: tuple[str, str],
    azure_pair: tuple[str, str],
    settings: dict[str, Any],
    *,
    azure_rpo: str = "1h",
) -> DrillPlan:
    doc = plan_doc(
        moto.url,
        dataset(*s3_pair, name="s3-data"),
        dataset(*azure_pair, name="azure-data", rpo=azure_rpo, store="azure"),
    )
    for role in ("primary", "dr"):
        doc["sites"][role]["object_stores"] = {
            "azure": {"provider": "azure-blob", "settings": settings}
        }
    return plan_from_text(yaml.safe_dump(doc))


@pytest.fixture()
def azure_pair(azurite: AzuriteServer) -> tuple[str, str]:
    return containers(azurite)


def in_sync(azurite: AzuriteServer, s3_pair: tuple[str, str], azure_pair: tuple[str, str]) -> None:
    both(s3_pair, "p/a", b"s3 object")
    for bucket in azure_pair:
        upload(azurite, bucket, "p/a", b"azure blob")
        upload(azurite, bucket, "p/b", b"another")


@dataclass
class Synced:
    """Both S3 buckets and both Azure containers hold the same objects."""

    moto: MotoServer
    azurite: AzuriteServer
    s3_pair: tuple[str, str]
    azure_pair: tuple[str, str]

    def plan(
        self,
        settings: dict[str, Any] | None = None,
        *,
        azure_pair: tuple[str, str] | None = None,
        azure_rpo: str = "1h",
    ) -> DrillPlan:
        return mixed_plan(
            self.moto,
            self.s3_pair,
            azure_pair or self.azure_pair,
            settings or self.azurite.settings(),
            azure_rpo=azure_rpo,
        )


@pytest.fixture()
def synced(
    moto_server: MotoServer,
    azurite: AzuriteServer,
    pair: tuple[str, str],
    azure_pair: tuple[str, str],
) -> Synced:
    in_sync(azurite, pair, azure_pair)
    return Synced(moto_server, azurite, pair, azure_pair)


def no_key_in(result: CheckResult) -> None:
    assert ACCOUNT_KEY not in json.dumps(result.to_json())


def test_one_dataset_on_s3_and_one_on_azure_pass_with_rpo_for_both(synced: Synced) -> None:
    azurite = synced.azurite
    pair = synced.s3_pair
    azure_pair = synced.azure_pair
    plan = synced.plan()
    results = {check_id: run(plan, check_id) for check_id in READ_CHECKS}
    for result in results.values():
        assert result.status is Status.PASS, result.summary
        no_key_in(result)
    replicated = results["data.replicated"]
    assert row(replicated, "azure-data")["matched"] == 2
    assert row(replicated, "s3-data")["matched"] == 1
    assert row(replicated, "azure-data")["dr"] == f"s3://{azure_pair[1]}/p/"  # the bucket's words
    rpo = results["data.rpo"]
    assert {r["name"]: r["lag_s"] for r in rpo.evidence["datasets"]} == {
        "s3-data": 0.0,
        "azure-data": 0.0,
    }
    assert row(rpo, "azure-data")["newest_at_dr"]["key"] in ("p/a", "p/b")
    canaries = results["data.dr_writable"].evidence["buckets"]
    assert {(r.get("store"), r["bucket"]) for r in canaries} == {
        (None, pair[1]),
        ("azure", azure_pair[1]),
    }
    assert all(r["removed"] for r in canaries)
    assert list(azurite.client().get_container_client(azure_pair[1]).list_blobs()) != []
    left = [b.name for b in azurite.client().get_container_client(azure_pair[1]).list_blobs()]
    assert sorted(left) == ["p/a", "p/b"]  # the canary is gone


def test_azure_lag_over_target_fails_rpo_naming_the_dataset(synced: Synced) -> None:
    azurite = synced.azurite
    azure_pair = synced.azure_pair
    upload(azurite, azure_pair[0], "p/late", b"not replicated")
    written = dt.datetime.now(dt.UTC)
    time.sleep(2.2)  # Azurite dates a blob now: the lag has to grow past the target
    plan = synced.plan(azure_rpo="2s")
    rpo = run(plan, "data.rpo")
    assert (rpo.status, rpo.blocking) == (Status.FAIL, True)
    assert rpo.summary.startswith("Replication lag over RPO target: azure-data")
    late = row(rpo, "azure-data")
    assert late["oldest_unreplicated"]["key"] == "p/late"
    lag_now = (dt.datetime.now(dt.UTC) - written).total_seconds()
    assert 2.0 <= late["lag_s"] <= lag_now + 1.0
    assert row(rpo, "s3-data")["within_target"] is True
    replicated = run(plan, "data.replicated")
    assert (replicated.status, replicated.blocking) == (Status.FAIL, True)
    assert "azure-data (1 missing, 0 differ)" in replicated.summary


def test_azure_without_versions_or_soft_delete_fails_delete_protection(synced: Synced) -> None:
    plan = synced.plan()
    result = run(plan, "data.delete_protection")
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert result.summary.startswith("DR copies not protected from deletes in azure-data:")
    assert row(result, "azure-data")["versioning"] == "Disabled"
    assert row(result, "s3-data")["violations"]["versioning_not_enabled"] == 0


@pytest.mark.parametrize("check_id", [*READ_CHECKS, "data.delete_protection"])
def test_a_missing_container_is_an_error_naming_it(check_id: str, synced: Synced) -> None:
    plan = synced.plan(azure_pair=(synced.azure_pair[0], "absent-container"))
    result = run(plan, check_id)
    if check_id == "data.dr_writable":  # the store answered: a refusal is a failure
        assert (result.status, result.blocking) == (Status.FAIL, True)
    else:
        assert result.status is Status.ERROR, result.summary
    assert "container 'absent-container' does not exist at the dr site" in json.dumps(
        result.to_json()
    )


def test_a_wrong_key_is_an_error_never_a_pass(
    synced: Synced, monkeypatch: pytest.MonkeyPatch
) -> None:
    azurite = synced.azurite
    wrong = ACCOUNT_KEY[:-8] + "AAAAAAA="
    monkeypatch.setenv("DRILLS_TEST_WRONG_AZURE_KEY", wrong)
    settings = azurite.settings("env:DRILLS_TEST_WRONG_AZURE_KEY")
    plan = synced.plan(settings)
    for check_id in ("data.replicated", "data.rpo"):
        result = run(plan, check_id)
        assert result.status is Status.ERROR, result.summary
        assert "AuthorizationFailure" in result.summary
        assert wrong not in json.dumps(result.to_json())


def test_an_unreachable_azurite_is_an_error(
    moto_server: MotoServer,
    pair: tuple[str, str],
    closed_port: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    both(pair, "p/a", b"s3 object")
    monkeypatch.setenv("DRILLS_TEST_AZURE_KEY_ANY", ACCOUNT_KEY)
    settings = {
        "account_url": f"http://{closed_port}/devstoreaccount1",
        "account_key": "env:DRILLS_TEST_AZURE_KEY_ANY",
    }
    plan = mixed_plan(moto_server, pair, ("az-primary", "az-dr"), settings)
    for check_id in (*READ_CHECKS, "data.delete_protection"):
        result = run(plan, check_id)
        assert result.status is Status.ERROR, (check_id, result.summary)
        assert "cannot reach the account" in result.summary
