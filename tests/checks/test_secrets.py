"""The "Secrets" checks against the lab, the drifted lab, server pairs and moto."""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

import drills.checks.areas.secrets  # noqa: F401 - registers the checks
from drills.checks.base import Status
from drills.errors import TemporaryError
from drills.plan import load_plan
from drills.targets.aws import AwsEndpoint
from drills.targets.fingerprint import fingerprint, short
from drills.targets.kube import KubeTarget
from drills.targets.secrets import AwsSecrets, aws_secret_fields
from drills_lab import topology
from drills_lab.moto_server import MotoServer
from drills_lab.runtime import LabInfo
from tests.support.kube_sites import SiteSpec, plan_for, point_at, run, site_pair

SECRET_CHECKS = ("secrets.synced", "secrets.rotation", "secrets.distinct_credentials")
API_KEYS = ("serving", "api-keys")
PULL = ("serving", "pull")
PLAN_SECRETS = [("serving", "api-keys", False), ("serving", "pull", True)]


def specs(
    dr_keys: dict[str, str] | None = None,
    dr_pull: dict[str, str] | None = None,
    rotated: dt.datetime | None = None,
) -> tuple[SiteSpec, SiteSpec]:
    """A primary with an API-key secret and a pull secret; DR as the arguments say."""
    keys = {"primary-key": "alpha-0001", "secondary-key": "beta-0002"}
    primary = SiteSpec(
        secrets={API_KEYS: keys, PULL: {".dockerconfigjson": "pull-at-primary"}}, rotated=rotated
    )
    dr_secrets = {}
    if dr_keys is not None:
        dr_secrets[API_KEYS] = dr_keys
    if dr_pull is not None:
        dr_secrets[PULL] = dr_pull
    return primary, SiteSpec(secrets=dr_secrets, rotated=rotated)


def entry(result: Any, name: str) -> dict[str, Any]:
    return next(s for s in result.evidence["secrets"] if s["secret"] == name)


# -- the lab ---------------------------------------------------------------------------


def test_the_lab_passes_every_secret_check(lab: LabInfo) -> None:
    plan = load_plan(Path(lab.state_dir) / "plan.yaml")
    results = {c: run(plan, c) for c in SECRET_CHECKS}
    assert {c: r.status for c, r in results.items()} == dict.fromkeys(SECRET_CHECKS, Status.PASS)
    synced = results["secrets.synced"].evidence
    # 3 Kubernetes + 1 AWS replica + 2 ExternalSecrets' target Secrets
    assert (synced["compared"], synced["matching"]) == (6, 6)
    assert [e["ready"] for e in synced["external_secrets"]] == ["True", "True"]
    assert synced["skipped_per_site"] == ["kubernetes:serving/registry-pull"]


def test_the_drifted_lab_fails_synced_for_exactly_the_seeded_secret(drift_lab: LabInfo) -> None:
    plan = load_plan(Path(drift_lab.state_dir) / "plan.yaml")
    results = {c: run(plan, c) for c in SECRET_CHECKS}
    synced = results["secrets.synced"]
    assert (synced.status, synced.blocking) == (Status.FAIL, True)
    bad = [s["secret"] for s in synced.evidence["secrets"] if s["status"] != "match"]
    failing = "/".join(topology.DRIFT_FAILING_EXTERNAL_SECRET)
    assert bad == ["serving/model-api-keys", failing]
    # The failing ExternalSecret is named, with its store and the error its operator recorded.
    assert f"ExternalSecret {failing} at DR is not Ready (SecretSyncedError: " in synced.summary
    assert f"ClusterSecretStore/{topology.SECRET_STORE}" in synced.summary
    assert "lab/feature-store" in synced.summary
    assert entry(synced, "serving/model-api-keys")["differing"] == ["primary-key", "secondary-key"]
    assert results["secrets.rotation"].status is Status.PASS
    assert results["secrets.distinct_credentials"].status is Status.PASS


# -- Kubernetes secrets on server pairs -----------------------------------------------------


def test_identical_and_distinct_secrets_pass(tmp_path: Path) -> None:
    primary, dr = specs(
        dr_keys={"primary-key": "alpha-0001", "secondary-key": "beta-0002"},
        dr_pull={".dockerconfigjson": "pull-at-dr"},
    )
    with site_pair(tmp_path, primary, dr):
        plan = plan_for(tmp_path, k8s_secrets=PLAN_SECRETS)
        results = {c: run(plan, c) for c in SECRET_CHECKS}
    assert all(r.status is Status.PASS for r in results.values())
    synced = entry(results["secrets.synced"], "serving/api-keys")
    fps = synced["fingerprints"]["primary-key"]
    assert fps["primary"] == fps["dr"] and len(fps["primary"]) == 16
    assert entry(results["secrets.distinct_credentials"], "serving/pull")["status"] == "distinct"


def test_a_secret_missing_at_dr_fails_and_blocks(tmp_path: Path) -> None:
    primary, dr = specs(dr_keys=None, dr_pull={".dockerconfigjson": "pull-at-dr"})
    with site_pair(tmp_path, primary, dr):
        result = run(plan_for(tmp_path, k8s_secrets=PLAN_SECRETS), "secrets.synced")
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert entry(result, "serving/api-keys")["status"] == "missing_at_dr"
    assert "serving/api-keys" in result.summary


def test_a_different_value_fails_naming_the_key(tmp_path: Path) -> None:
    primary, dr = specs(dr_keys={"primary-key": "alpha-0001", "secondary-key": "beta-STALE"})
    with site_pair(tmp_path, primary, dr):
        result = run(plan_for(tmp_path, k8s_secrets=PLAN_SECRETS[:1]), "secrets.synced")
    assert (result.status, result.blocking) == (Status.FAIL, True)
    found = entry(result, "serving/api-keys")
    assert (found["status"], found["differing"]) == ("mismatch", ["secondary-key"])
    shown = found["fingerprints"]["secondary-key"]
    assert shown["primary"] != shown["dr"]


def test_different_key_names_fail(tmp_path: Path) -> None:
    primary, dr = specs(dr_keys={"primary-key": "alpha-0001", "tertiary-key": "x"})
    with site_pair(tmp_path, primary, dr):
        result = run(plan_for(tmp_path, k8s_secrets=PLAN_SECRETS[:1]), "secrets.synced")
    found = entry(result, "serving/api-keys")
    assert result.status is Status.FAIL
    assert (found["missing_keys"], found["extra_keys"]) == (["secondary-key"], ["tertiary-key"])


def test_a_per_site_secret_shared_between_sites_fails_without_blocking(tmp_path: Path) -> None:
    primary, dr = specs(
        dr_keys={"primary-key": "alpha-0001", "secondary-key": "beta-0002"},
        dr_pull={".dockerconfigjson": "pull-at-primary"},  # copied, not issued per site
    )
    with site_pair(tmp_path, primary, dr):
        plan = plan_for(tmp_path, k8s_secrets=PLAN_SECRETS)
        distinct = run(plan, "secrets.distinct_credentials")
        synced = run(plan, "secrets.synced")
    assert (distinct.status, distinct.blocking) == (Status.FAIL, False)
    found = entry(distinct, "serving/pull")
    assert (found["status"], found["shared_keys"]) == ("shared", [".dockerconfigjson"])
    # synced skips per-site secrets: they are meant to differ.
    assert synced.status is Status.PASS
    assert synced.evidence["skipped_per_site"] == ["kubernetes:serving/pull"]


def test_a_per_site_secret_missing_at_dr_fails_and_blocks(tmp_path: Path) -> None:
    primary, dr = specs(dr_keys={"primary-key": "alpha-0001", "secondary-key": "beta-0002"})
    with site_pair(tmp_path, primary, dr):
        result = run(plan_for(tmp_path, k8s_secrets=PLAN_SECRETS), "secrets.distinct_credentials")
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert entry(result, "serving/pull")["status"] == "missing_at_dr"


@pytest.mark.parametrize(
    ("age_days", "status"), [(30, Status.PASS), (100, Status.WARN), (200, Status.FAIL)]
)
def test_rotation_age_from_the_annotation(tmp_path: Path, age_days: int, status: Status) -> None:
    now = dt.datetime.now(dt.UTC)
    primary, dr = specs(
        dr_keys={"primary-key": "alpha-0001", "secondary-key": "beta-0002"},
        dr_pull={".dockerconfigjson": "pull-at-dr"},
        rotated=now - dt.timedelta(days=age_days),
    )
    with site_pair(tmp_path, primary, dr):
        result = run(plan_for(tmp_path, k8s_secrets=PLAN_SECRETS), "secrets.rotation", now=now)
    assert result.status is status and result.blocking is False
    rows = result.evidence["secrets"]
    # The shared secret is dated at the primary; the per-site one at both sites.
    assert [(r["secret"], r["site"]) for r in rows] == [
        ("serving/api-keys", "primary"),
        ("serving/pull", "primary"),
        ("serving/pull", "dr"),
    ]
    assert {r["source"] for r in rows} == {"annotation drills.dev/rotated-at"}
    assert rows[0]["age_days"] == pytest.approx(age_days, abs=0.1)


def test_rotation_falls_back_to_the_creation_time(tmp_path: Path) -> None:
    primary, dr = specs(dr_pull={".dockerconfigjson": "pull-at-dr"})  # no annotation
    with site_pair(tmp_path, primary, dr) as pair:

        def bad_annotation(obj: dict[str, Any]) -> dict[str, Any]:
            obj["metadata"]["annotations"] = {"drills.dev/rotated-at": "last tuesday"}
            return obj

        pair.primary.store.patch("secrets", "serving", "pull", bad_annotation)
        plan = plan_for(tmp_path, k8s_secrets=PLAN_SECRETS, max_age_days=1)
        fresh = run(plan, "secrets.rotation")
        later = run(plan, "secrets.rotation", now=dt.datetime.now(dt.UTC) + dt.timedelta(days=3))
    assert fresh.status is Status.PASS
    assert {r["source"] for r in fresh.evidence["secrets"]} == {"creationTimestamp"}
    assert "not ISO 8601" in entry(fresh, "serving/pull")["note"]
    assert later.status is Status.FAIL  # 3 days old against 1 day: beyond twice the maximum


def test_unreachable_dr_cluster_is_an_error(tmp_path: Path, closed_port: str) -> None:
    primary, dr = specs(dr_keys={})
    with site_pair(tmp_path, primary, dr):
        point_at(tmp_path, "dr", closed_port)
        result = run(plan_for(tmp_path, k8s_secrets=PLAN_SECRETS), "secrets.synced")
    assert (result.status, result.blocking) == (Status.ERROR, True)
    assert "connection refused" in result.summary


# -- AWS Secrets Manager on moto -----------------------------------------------------------


@pytest.fixture
def sm(moto_server: MotoServer, aws_env: dict[str, str]) -> Iterator[dict[str, Any]]:
    clients = {
        region: boto3.client("secretsmanager", region_name=region, endpoint_url=moto_server.url)
        for region in ("us-east-1", "us-west-2")
    }
    yield clients
    for c in clients.values():
        c.close()


def _aws_plan(tmp_path: Path, moto_server: MotoServer, *ids: tuple[str, bool]) -> Any:
    return plan_for(tmp_path, aws_secrets=ids, aws_endpoint=moto_server.url)


def test_aws_replica_in_sync_passes(
    tmp_path: Path, moto_server: MotoServer, sm: dict[str, Any]
) -> None:
    name = f"test/{uuid.uuid4().hex[:8]}"
    value = json.dumps({"username": "svc", "password": "s3cret-in-sync"})
    sm["us-east-1"].create_secret(
        Name=name, SecretString=value, AddReplicaRegions=[{"Region": "us-west-2"}]
    )
    plan = _aws_plan(tmp_path, moto_server, (name, False))
    synced, rotation = run(plan, "secrets.synced"), run(plan, "secrets.rotation")
    assert synced.status is Status.PASS
    assert entry(synced, name)["keys"] == ["password", "username"]
    assert rotation.status is Status.PASS
    assert entry(rotation, name)["source"] in ("LastChangedDate", "LastRotatedDate")


def test_aws_divergent_and_missing_secrets_fail(
    tmp_path: Path, moto_server: MotoServer, sm: dict[str, Any]
) -> None:
    # moto refuses writes to a replica, so divergence is a separate DR secret of that name.
    drifted, missing = f"test/{uuid.uuid4().hex[:8]}", f"test/{uuid.uuid4().hex[:8]}"
    sm["us-east-1"].create_secret(Name=drifted, SecretString='{"user": "a", "password": "new"}')
    sm["us-west-2"].create_secret(Name=drifted, SecretString='{"user": "a", "password": "old"}')
    sm["us-east-1"].create_secret(Name=missing, SecretString="only-at-primary")
    plan = _aws_plan(tmp_path, moto_server, (drifted, False), (missing, False))
    result = run(plan, "secrets.synced")
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert entry(result, drifted)["differing"] == ["password"]
    assert entry(result, missing)["status"] == "missing_at_dr"


def test_aws_per_site_secret_with_one_value_at_both_sites_fails(
    tmp_path: Path, moto_server: MotoServer, sm: dict[str, Any]
) -> None:
    name = f"test/{uuid.uuid4().hex[:8]}"
    for region in ("us-east-1", "us-west-2"):
        sm[region].create_secret(Name=name, SecretString="same-token-both-sites")
    result = run(_aws_plan(tmp_path, moto_server, (name, True)), "secrets.distinct_credentials")
    assert (result.status, result.blocking) == (Status.FAIL, False)
    assert entry(result, name)["shared_keys"] == ["(value)"]


def test_aws_adapter_describe_and_value(moto_server: MotoServer, sm: dict[str, Any]) -> None:
    name = f"test/{uuid.uuid4().hex[:8]}"
    sm["us-east-1"].create_secret(
        Name=name, SecretBinary=b"\x00bin", AddReplicaRegions=[{"Region": "us-west-2"}]
    )
    dr = AwsSecrets(AwsEndpoint("us-west-2", moto_server.url), "dr")
    try:
        described = dr.describe(name)
        assert described is not None and described["PrimaryRegion"] == "us-east-1"
        assert dr.value(name) == b"\x00bin"
        assert dr.describe("absent/one") is None and dr.value("absent/one") is None
        assert "bin" not in repr(dr)
    finally:
        dr.close()
    assert aws_secret_fields(b'{"a": 1, "b": "x"}') == {"a": b"1", "b": b"x"}
    assert aws_secret_fields(b"[1]") == {"(value)": b"[1]"}


def test_aws_adapter_unreachable_and_hung(closed_port: str, blackhole: str, aws_env: dict) -> None:
    refused = AwsSecrets(AwsEndpoint("us-east-1", f"http://{closed_port}"), "dr")
    with pytest.raises(TemporaryError, match="cannot connect"):
        refused.describe("x")
    hung = AwsSecrets(AwsEndpoint("us-east-1", f"http://{blackhole}"), "dr", read_timeout=0.3)
    started = time.monotonic()
    with pytest.raises(TemporaryError, match="timed out") as caught:
        hung.value("x")
    assert time.monotonic() - started < 6  # three attempts with backoff, each bounded
    assert caught.value.target == f"secretsmanager dr us-east-1 (http://{blackhole})"


# -- nothing leaks -------------------------------------------------------------------------


def test_no_secret_value_reaches_the_result_or_the_logs(
    tmp_path: Path,
    moto_server: MotoServer,
    sm: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    aws_id = f"test/{uuid.uuid4().hex[:8]}"
    sm["us-east-1"].create_secret(Name=aws_id, SecretString='{"password": "aws-primary-pw"}')
    sm["us-west-2"].create_secret(Name=aws_id, SecretString='{"password": "aws-dr-pw"}')
    primary, dr = specs(dr_keys={"primary-key": "alpha-LEAK", "secondary-key": "beta-LEAK"})
    with site_pair(tmp_path, primary, dr):
        plan = plan_for(
            tmp_path,
            k8s_secrets=PLAN_SECRETS[:1],
            aws_secrets=[(aws_id, False)],
            aws_endpoint=moto_server.url,
        )
        caplog.set_level(logging.DEBUG)  # everything, botocore and urllib3 included
        caplog.clear()  # the setup above logged its own writes
        result = run(plan, "secrets.synced")
        logged = caplog.text + "".join(str(r.args) for r in caplog.records)
        # The real values, read back from both sites.
        values = set()
        for role in ("primary", "dr"):
            site = plan.sites.primary if role == "primary" else plan.sites.dr
            kube = KubeTarget.for_site(role, site, plan)
            found = kube.secret("serving", "api-keys")
            kube.close()
            assert found is not None
            values |= {base64.b64decode(v).decode() for v in found["data"].values()}
            values |= set(found["data"].values())  # the base64 forms too
        for region in ("us-east-1", "us-west-2"):
            raw = sm[region].get_secret_value(SecretId=aws_id)["SecretString"]
            values |= {raw, json.loads(raw)["password"]}
    assert result.status is Status.FAIL
    assert "alpha-LEAK" in values and "aws-dr-pw" in values
    published = json.dumps(result.to_json())
    assert "Response body" in logged  # botocore did log at DEBUG, with the body blanked
    for value in values:
        assert value not in published
        assert value not in logged


def test_fingerprints_are_keyed() -> None:
    one, two = b"k" * 32, b"j" * 32
    assert fingerprint(one, b"v") == fingerprint(one, b"v")
    assert fingerprint(one, b"v") != fingerprint(two, b"v")
    assert (
        len(fingerprint(one, b"v")) == 64
        and short(fingerprint(one, b"v")) == fingerprint(one, b"v")[:16]
    )
    with pytest.raises(ValueError):
        fingerprint(b"", b"v")
