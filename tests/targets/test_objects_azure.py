"""The azure-blob object store against Azurite (real HTTP, the official SDK)."""

from __future__ import annotations

import hashlib
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from drills.errors import MisroutedError, PermanentError, TemporaryError
from drills.plan import DrillPlan, load_plan
from drills.targets.objects import ListingLimits, Location, compare_objects
from drills.targets.objects.azure import NO_MD5, SOFT_DELETE_RULE, AzureBlobStore
from drills.targets.providers import installed
from drills.targets.sites import Targets
from tests.support.azurite import ACCOUNT_KEY, KEY_ENV, AzuriteServer
from tests.support.drill import offline_lab_plan_data


def container(server: AzuriteServer, label: str) -> str:
    name = f"{label}-{uuid.uuid4().hex[:10]}"
    server.client().create_container(name)
    return name


def upload(server: AzuriteServer, bucket: str, key: str, body: bytes) -> None:
    server.client().get_blob_client(bucket, key).upload_blob(body, overwrite=True)


def azure_plan(tmp_path: Path, settings: dict[str, Any]) -> DrillPlan:
    """The lab's plan (offline) with an `azure` object store at both sites."""
    data = offline_lab_plan_data()
    for role in ("primary", "dr"):
        data["sites"][role]["object_stores"] = {
            "azure": {"provider": "azure-blob", "settings": settings}
        }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_plan(path)


def store_of(tmp_path: Path, settings: dict[str, Any]) -> AzureBlobStore:
    with Targets(azure_plan(tmp_path, settings)) as targets:
        built = targets.dr.objects_for("azure")
    assert isinstance(built, AzureBlobStore)
    return built


@pytest.fixture()
def store(azurite: AzuriteServer, tmp_path: Path) -> AzureBlobStore:
    return store_of(tmp_path, azurite.settings())


def test_the_provider_is_listed_with_the_object_checks() -> None:
    found = {i.name: i for i in installed(refresh=True)}
    azure = found["azure-blob"]
    assert azure.provider is not None and azure.provider.kind == "objects"
    assert azure.provider.supports() == ["readiness"]
    assert "data.rpo" in azure.provider.checks and "data.dr_writable" in azure.provider.checks


def test_listing_is_in_name_order_across_pages(azurite: AzuriteServer) -> None:
    bucket = container(azurite, "list")
    keys = ["p/b", "p/a", "p/c/1", "p/c/0", "q/x", "p/d"]
    for key in keys:
        upload(azurite, bucket, key, key.encode())
    paged = AzureBlobStore(azurite.client(), "dr", limits=ListingLimits(page_size=2))
    listed = list(paged.objects(bucket, "p/"))
    assert [o.key for o in listed] == sorted(k for k in keys if k.startswith("p/"))
    assert {o.size for o in listed} == {3, 5}
    assert paged.subdirectories(bucket, "p/") == ["p/c/"]


def test_etag_is_the_content_md5_so_copies_in_two_accounts_compare(
    azurite: AzuriteServer, store: AzureBlobStore
) -> None:
    primary, dr = container(azurite, "cmp-p"), container(azurite, "cmp-d")
    for key, body in (("p/same", b"same bytes"), ("p/diff", b"one")):
        upload(azurite, primary, key, body)
    upload(azurite, dr, "p/same", b"same bytes")
    upload(azurite, dr, "p/diff", b"two")
    listed = {o.key: o for o in store.objects(primary, "p/")}
    assert listed["p/same"].etag == hashlib.md5(b"same bytes").hexdigest()
    diff = compare_objects(Location(store, primary, "p/"), Location(store, dr, "p/"), examples=5)  # type: ignore[arg-type]
    assert (diff.matched, diff.mismatched.count) == (1, 1)
    assert diff.mismatched.examples[0]["key"] == "p/diff"


def test_a_blob_without_content_md5_is_unverified_not_matched(
    azurite: AzuriteServer, store: AzureBlobStore
) -> None:
    from azure.storage.blob import ContentSettings

    primary, dr = container(azurite, "nomd5-p"), container(azurite, "nomd5-d")
    for bucket in (primary, dr):
        blob = azurite.client().get_blob_client(bucket, "p/x")
        blob.upload_blob(b"x" * 10, overwrite=True)
        blob.set_http_headers(ContentSettings(content_md5=None))
    etags = [o.etag for b in (primary, dr) for o in store.objects(b, "p/")]
    assert all(e.endswith(NO_MD5) for e in etags) and etags[0] != etags[1]
    diff = compare_objects(Location(store, primary, "p/"), Location(store, dr, "p/"), examples=5)  # type: ignore[arg-type]
    assert (diff.matched, diff.unverified.count, diff.mismatched.count) == (0, 1, 0)


def test_newest_is_the_latest_last_modified(azurite: AzuriteServer, store: AzureBlobStore) -> None:
    bucket = container(azurite, "newest")
    assert store.newest(bucket, "p/") is None
    upload(azurite, bucket, "p/z-old", b"1")
    time.sleep(1.1)  # Last-Modified has whole seconds
    upload(azurite, bucket, "p/a-new", b"2")
    newest = store.newest(bucket, "p/")
    assert newest is not None and newest.key == "p/a-new"
    assert newest.last_modified.tzinfo is not None


def test_without_versions_or_soft_delete_add_only_is_not_protected(
    azurite: AzuriteServer, store: AzureBlobStore
) -> None:
    bucket = container(azurite, "plain")
    upload(azurite, bucket, "p/a", b"a")
    assert store.versioning(bucket) == "Disabled"
    assert store.lifecycle_rules(bucket) == ()
    histories = list(store.key_histories(bucket, "p/"))
    assert [(h.key, h.deleted, h.object_versions) for h in histories] == [("p/a", False, 1)]


def test_soft_delete_counts_as_protection_and_its_days_as_a_rule(tmp_path: Path) -> None:
    from azure.storage.blob import RetentionPolicy

    # Its own Azurite: soft delete is a setting of the whole account.
    server = AzuriteServer(tmp_path / "state")
    server.state_dir.mkdir()
    server.start()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(KEY_ENV, ACCOUNT_KEY)
            own = store_of(tmp_path, server.settings())
            bucket = container(server, "soft")
            server.client().set_service_properties(
                delete_retention_policy=RetentionPolicy(enabled=True, days=7)
            )
            assert own.versioning(bucket) == "Enabled"
            (rule,) = own.lifecycle_rules(bucket)
            assert (rule.id, rule.noncurrent_days, rule.expires_current) == (
                SOFT_DELETE_RULE,
                7,
                False,
            )
    finally:
        server.stop()


def test_canary_is_written_read_back_and_removed(
    azurite: AzuriteServer, store: AzureBlobStore
) -> None:
    bucket = container(azurite, "canary")
    body = b"canary bytes\n"
    version = store.put_canary(bucket, "drills-dr-writable-canary/x.txt", body)
    assert version is None  # Azurite keeps no versions
    assert store.read(bucket, "drills-dr-writable-canary/x.txt", limit=len(body)) == body
    with pytest.raises(PermanentError, match="larger than 3 bytes"):
        store.read(bucket, "drills-dr-writable-canary/x.txt", limit=3)
    with pytest.raises(PermanentError, match="already exists"):
        store.put_canary(bucket, "drills-dr-writable-canary/x.txt", body)
    store.remove_canary(bucket, "drills-dr-writable-canary/x.txt", version)
    assert list(store.objects(bucket)) == []


def test_a_missing_container_is_named(store: AzureBlobStore) -> None:
    with pytest.raises(PermanentError, match="container 'nowhere' does not exist at the dr site"):
        store.versioning("nowhere")
    with pytest.raises(PermanentError, match="does not exist"):
        list(store.objects("nowhere"))


def test_a_wrong_key_is_a_refusal_and_never_shown(
    azurite: AzuriteServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = ACCOUNT_KEY[:-8] + "AAAAAAA="
    monkeypatch.setenv("DRILLS_TEST_WRONG_KEY", wrong)
    bad = store_of(tmp_path, azurite.settings("env:DRILLS_TEST_WRONG_KEY"))
    with pytest.raises(PermanentError) as caught:
        bad.versioning(container(azurite, "key"))
    assert not isinstance(caught.value, TemporaryError | MisroutedError)
    assert "Authorization" in caught.value.cause or "Authentication" in caught.value.cause
    assert wrong not in str(caught.value) and wrong not in repr(bad)


def test_an_unreachable_account_is_temporary(closed_port: str, tmp_path: Path) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENV, ACCOUNT_KEY)
        dead = store_of(tmp_path, {"account_url": f"http://{closed_port}/devstoreaccount1",
                                   "account_key": f"env:{KEY_ENV}"})  # fmt: skip
        dead.retry = dead.retry.with_(attempts=1)
        with pytest.raises(TemporaryError, match="cannot reach the account"):
            dead.versioning("any")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"account_url": "http://127.0.0.1:1/a"}, "account_key"),
        ({"account_url": "http://127.0.0.1:1/a", "account_key": "env:X", "colour": 1}, "colour"),
        ({"connection_string": "DefaultEndpointsProtocol=http"}, "connection_string"),
        ({"account_key": "env:X"}, "account_url must be"),
    ],
)
def test_bad_settings_are_one_line(
    settings: dict[str, Any], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("X", "a2V5")
    with pytest.raises(PermanentError, match=message) as caught:
        store_of(tmp_path, settings)
    assert "\n" not in str(caught.value)


def test_a_connection_string_by_reference(
    azurite: AzuriteServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = (
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
        f"AccountKey={ACCOUNT_KEY};BlobEndpoint={azurite.account_url};"
    )
    (tmp_path / "azure.conn").write_text(conn)
    (tmp_path / "azure.conn").chmod(0o600)
    by_file = store_of(tmp_path, {"connection_string": "file:azure.conn"})
    bucket = container(azurite, "conn")
    upload(azurite, bucket, "k", b"v")
    assert [o.key for o in by_file.objects(bucket)] == ["k"]
    assert ACCOUNT_KEY not in by_file.target and azurite.account_url in by_file.target
