"""The Data checks against the lab, the drifted lab, and buckets each test fills on moto."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from drills.checks.areas import data, data_protection
from drills.checks.base import CheckResult, Status
from drills.plan import DrillPlan, load_plan, plan_from_text
from drills.targets.objects import LifecycleRule
from drills.targets.sites import Targets
from drills_lab import topology
from drills_lab.moto_server import MotoServer
from drills_lab.runtime import LabInfo
from tests.support.checks import UNUSED_DNS
from tests.support.checks import run_check as run
from tests.support.s3_seed import multipart_etag, put

DATA_CHECKS = ("data.replicated", "data.rpo", "data.checkpoint_fresh", "data.delete_protection")
HOUR = dt.timedelta(hours=1)


def plan_over(endpoint: str, *datasets: dict[str, Any]) -> DrillPlan:
    return plan_from_text(yaml.safe_dump(plan_doc(endpoint, *datasets)))


def plan_doc(endpoint: str, *datasets: dict[str, Any]) -> dict[str, Any]:
    """A plan's data over S3 at ``endpoint``, for a test to change before it loads it."""

    def site(role: str, addr: str) -> dict[str, Any]:
        return {
            "kubernetes": {"kubeconfig": f"{role}.kubeconfig"},
            "registry": {"kind": "oci", "url": f"http://{addr}:5000"},
            "objects": {
                "endpoint_url": endpoint,
                "region": "us-east-1",
                "credentials": {
                    "access_key_id": "env:AWS_ACCESS_KEY_ID",
                    "secret_access_key": "env:AWS_SECRET_ACCESS_KEY",
                },
            },
            "ingress": {"mode": "controller", "deployment": {"namespace": "i", "name": "c"}},
            "endpoint": f"http://{addr}:18080/healthz",
        }

    return {
        "name": "data-test",
        "sites": {"primary": site("primary", "127.0.0.2"), "dr": site("dr", "127.0.0.3")},
        "workloads": [
            {
                "name": "w",
                "namespace": "n",
                "kind": "Deployment",
                "tier": "critical",
                "dr_replicas": 1,
            }
        ],
        "datasets": list(datasets),
        "dns": UNUSED_DNS,
        "objectives": {"rto": "15m", "rpo": "1h"},
    }


def dataset(
    primary: str, dr: str, *, name: str = "ds", kind: str = "data", rpo: str = "1h", **more: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "primary_bucket": primary,
        "dr_bucket": dr,
        "prefix": "p/",
        "rpo_target": rpo,
        **more,
    }


def both(pair: tuple[str, str], key: str, body: bytes, age: dt.timedelta = HOUR) -> None:
    put(pair[0], key, body, age=age)
    put(pair[1], key, body, age=age)


def row(result: CheckResult, name: str = "ds") -> dict[str, Any]:
    [found] = [r for r in result.evidence["datasets"] if r["name"] == name]
    return found


# -- the lab ------------------------------------------------------------------------------


def test_lab_passes_every_data_check(lab: LabInfo) -> None:
    plan = load_plan(Path(lab.state_dir) / "plan.yaml")
    results = {check_id: run(plan, check_id) for check_id in DATA_CHECKS}
    for result in results.values():
        assert (result.status, result.blocking) == (Status.PASS, False), result.summary
        assert json.loads(json.dumps(result.to_json()))["evidence"]["datasets"]
    total = sum(ds.objects for ds in topology.DATASETS)
    # The lab's trainer keeps adding checkpoints while it runs.
    assert results["data.replicated"].evidence["objects_primary"] >= total
    assert {r["lag_s"] for r in results["data.rpo"].evidence["datasets"]} == {0.0}
    assert set(results["data.delete_protection"].evidence["violations"].values()) == {0}


def test_drift_lab_fails_only_on_the_stale_checkpoints(drift_lab: LabInfo) -> None:
    plan = load_plan(Path(drift_lab.state_dir) / "plan.yaml")
    stale = topology.DRIFT_STALE_DATASET
    replicated = run(plan, "data.replicated")
    assert (replicated.status, replicated.blocking) == (Status.FAIL, True)
    rows = {r["name"]: r for r in replicated.evidence["datasets"]}
    unreplicated = {name: (r["missing"], r["mismatched"], r["pending"]) for name, r in rows.items()}
    assert unreplicated["training-data"] == unreplicated["model-artifacts"] == (0, 0, 0)
    # Checkpoints were seeded every 30 minutes, the newest 5 minutes ago: 12 in the 6
    # hours since replication stopped, 11 of them older than the 15-minute RPO target.
    # The lab's trainer adds more (unreplicated) while the lab runs.
    missing, mismatched, pending = unreplicated[stale]
    assert missing >= 11 and missing + pending >= 12 and mismatched == 0
    assert replicated.summary.startswith("1 of 3 datasets incomplete at DR: checkpoints")

    # Ages grow with the lab's uptime; the seeded ones were fixed at its start.
    uptime = time.time() - drift_lab.started_at
    rpo = run(plan, "data.rpo")
    assert (rpo.status, rpo.blocking) == (Status.FAIL, True)
    assert [r["name"] for r in rpo.evidence["datasets"] if not r["within_target"]] == [stale]
    assert 5.5 * 3600 < row(rpo, stale)["lag_s"] - uptime < 6 * 3600

    fresh = run(plan, "data.checkpoint_fresh")
    assert (fresh.status, fresh.blocking) == (Status.FAIL, True)
    newest = row(fresh, stale)
    assert 6 * 3600 <= newest["newest_at_dr"]["age_s"] - uptime < 6.5 * 3600
    assert newest["newest_at_primary"]["age_s"] < 600

    assert run(plan, "data.delete_protection").status is Status.PASS


# -- data.replicated ----------------------------------------------------------------------


def test_identical_copies_pass_and_extra_objects_at_dr_are_allowed(
    moto_server: MotoServer, pair: tuple[str, str]
) -> None:
    for i in range(7):
        both(pair, f"p/{i % 3}/obj-{i}", b"data-%d" % i)
    put(pair[1], "p/0/only-at-dr", b"older run")
    put(pair[0], "elsewhere/not-in-the-dataset", b"x")
    result = run(plan_over(moto_server.url, dataset(*pair)), "data.replicated")
    assert (result.status, result.blocking) == (Status.PASS, False), result.summary
    assert (row(result)["matched"], row(result)["extra"], row(result)["missing"]) == (7, 1, 0)
    assert row(result)["examples"] == {"extra": [{"key": "p/0/only-at-dr", "size": 9}]}
    assert result.summary == "1 dataset at DR: 7 primary objects match; 1 extra"


def test_missing_and_different_objects_fail(moto_server: MotoServer, pair: tuple[str, str]) -> None:
    both(pair, "p/same", b"same")
    put(pair[0], "p/missing", b"never copied", age=2 * HOUR)
    put(pair[0], "p/resized", b"longer content", age=2 * HOUR)
    put(pair[1], "p/resized", b"short")
    put(pair[0], "p/rewritten", b"version 2", age=2 * HOUR)
    put(pair[1], "p/rewritten", b"version 1")  # same size: only the ETag tells
    result = run(plan_over(moto_server.url, dataset(*pair)), "data.replicated")
    assert (result.status, result.blocking) == (Status.FAIL, True)
    found = row(result)
    assert (found["matched"], found["missing"], found["mismatched"]) == (1, 1, 2)
    assert [e["key"] for e in found["examples"]["missing"]] == ["p/missing"]
    reasons = {e["key"]: e["reason"] for e in found["examples"]["mismatched"]}
    assert reasons == {"p/resized": "size", "p/rewritten": "etag"}
    assert "ds (1 missing, 2 differ)" in result.summary
    assert f"aws s3 sync s3://{pair[0]}/p/ s3://{pair[1]}/p/" in result.remediation


def test_multipart_etags_are_settled_by_checksum(
    moto_server: MotoServer, pair: tuple[str, str]
) -> None:
    body = b"weights" * 100
    for key, dr_body, sums in (
        ("p/equal", body, True),
        ("p/corrupt", b"WEIGHTS" * 100, True),
        ("p/unknown", body, False),
    ):
        put(
            pair[0],
            key,
            body,
            age=2 * HOUR,
            etag=multipart_etag(body, 3),
            sha256_of=body if sums else None,
        )
        put(
            pair[1], key, dr_body, etag=multipart_etag(body, 5), sha256_of=dr_body if sums else None
        )
    result = run(plan_over(moto_server.url, dataset(*pair)), "data.replicated")
    found = row(result)
    assert (found["matched"], found["mismatched"], found["unverified"]) == (1, 1, 1)
    assert found["examples"]["mismatched"][0]["reason"] == "checksum"
    assert result.status is Status.FAIL  # the corrupt copy

    put(pair[1], "p/corrupt", body, etag=multipart_etag(body, 5), sha256_of=body)
    result = run(plan_over(moto_server.url, dataset(*pair)), "data.replicated")
    assert (result.status, result.blocking) == (Status.WARN, False), result.summary
    assert [e["key"] for e in row(result)["examples"]["unverified"]] == ["p/unknown"]


def test_objects_younger_than_the_rpo_target_are_pending(
    moto_server: MotoServer, pair: tuple[str, str]
) -> None:
    both(pair, "p/old", b"x", age=3 * HOUR)
    put(pair[0], "p/just-written", b"new", age=dt.timedelta(minutes=5))
    put(pair[0], "p/old", b"overwritten", age=dt.timedelta(minutes=2))
    plan = plan_over(moto_server.url, dataset(*pair, rpo="30m"))
    result = run(plan, "data.replicated")
    assert (result.status, result.blocking) == (Status.PASS, False), result.summary
    found = row(result)
    assert (found["missing"], found["mismatched"], found["pending"]) == (0, 0, 2)
    assert [(e["key"], e["reason"]) for e in found["examples"]["pending"]] == [
        ("p/just-written", "missing"),
        ("p/old", "size"),
    ]
    assert result.summary.endswith("; 2 pending")
    lag = row(run(plan, "data.rpo"))["lag_s"]
    assert 4 * 60 < lag < 6 * 60


def test_missing_bucket_is_an_error_naming_it(
    moto_server: MotoServer, pair: tuple[str, str]
) -> None:
    result = run(
        plan_over(moto_server.url, dataset(pair[0], "no-such-dr-bucket")), "data.replicated"
    )
    assert (result.status, result.blocking) == (Status.ERROR, True)
    assert "'no-such-dr-bucket'" in result.summary and "dr site" in result.summary


def test_unreachable_storage_is_an_error(closed_port: str, aws_env: dict[str, str]) -> None:
    started = time.monotonic()
    result = run(plan_over(f"http://{closed_port}", dataset("a-bucket", "b-bucket")), "data.rpo")
    assert result.status is Status.ERROR
    assert "cannot connect" in result.summary and closed_port in result.summary
    assert time.monotonic() - started < 8


def test_plan_without_datasets_passes(moto_server: MotoServer, aws_env: dict[str, str]) -> None:
    plan = plan_over(moto_server.url)
    for check_id in DATA_CHECKS:
        result = run(plan, check_id)
        assert result.status is Status.PASS and "No" in result.summary


def test_replicated_and_rpo_share_one_comparison(
    moto_server: MotoServer, pair: tuple[str, str]
) -> None:
    both(pair, "p/a", b"a")
    plan = plan_over(moto_server.url, dataset(*pair))
    with Targets(plan) as targets:
        first = data.dataset_diff(targets, plan.datasets[0])
        assert data.dataset_diff(targets, plan.datasets[0]) is first
    with Targets(plan) as targets:
        assert data.dataset_diff(targets, plan.datasets[0]) is not first


# -- data.rpo -----------------------------------------------------------------------------


def test_lag_is_the_age_of_the_oldest_object_not_at_dr(
    moto_server: MotoServer, pair: tuple[str, str]
) -> None:
    both(pair, "p/old", b"x", age=5 * HOUR)
    put(pair[0], "p/recent", b"new", age=dt.timedelta(minutes=10))
    put(pair[0], "p/changed", b"v2", age=dt.timedelta(minutes=20))
    put(pair[1], "p/changed", b"v1", age=2 * HOUR)
    result = run(plan_over(moto_server.url, dataset(*pair, rpo="30m")), "data.rpo")
    assert (result.status, result.blocking) == (Status.PASS, False), result.summary
    found = row(result)
    assert 19 * 60 < found["lag_s"] < 21 * 60
    assert found["oldest_unreplicated"]["key"] == "p/changed"
    assert found["unreplicated"] == 2
    assert (
        found["newest_primary"]["key"] == "p/recent" and found["newest_primary"]["at_dr"] is False
    )
    assert found["newest_at_dr"]["key"] == "p/changed"


def test_lag_over_target_fails(moto_server: MotoServer, pair: tuple[str, str]) -> None:
    both(pair, "p/copied", b"x", age=dt.timedelta(minutes=1))
    put(pair[0], "p/stuck", b"x", age=2 * HOUR)
    result = run(plan_over(moto_server.url, dataset(*pair, rpo="1h")), "data.rpo")
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert 2 * 3600 - 60 < row(result)["lag_s"] < 2 * 3600 + 60
    assert result.summary.startswith("Replication lag over RPO target: ds 2 h")


# -- data.checkpoint_fresh ----------------------------------------------------------------


def test_fresh_checkpoint_passes(moto_server: MotoServer, pair: tuple[str, str]) -> None:
    both(pair, "p/step-1/model.safetensors", b"w", age=3 * HOUR)
    both(pair, "p/step-2/model.safetensors", b"w", age=dt.timedelta(minutes=4))
    plan = plan_over(moto_server.url, dataset(*pair, kind="checkpoint", rpo="15m"))
    result = run(plan, "data.checkpoint_fresh")
    assert result.status is Status.PASS, result.summary
    assert row(result)["newest_at_dr"]["key"] == "p/step-2/model.safetensors"


def test_stale_checkpoint_fails(moto_server: MotoServer, pair: tuple[str, str]) -> None:
    both(pair, "p/step-1/model.safetensors", b"w", age=3 * HOUR)
    put(pair[0], "p/step-2/model.safetensors", b"w", age=dt.timedelta(minutes=4))
    plan = plan_over(moto_server.url, dataset(*pair, kind="checkpoint", rpo="15m"))
    result = run(plan, "data.checkpoint_fresh")
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert 3 * 3600 - 60 < row(result)["newest_at_dr"]["age_s"] < 3 * 3600 + 60
    assert row(result)["newest_at_primary"]["key"] == "p/step-2/model.safetensors"
    assert "ds is 3 h" in result.summary


def test_no_checkpoint_at_dr_fails(moto_server: MotoServer, pair: tuple[str, str]) -> None:
    put(pair[0], "p/step-1/model.safetensors", b"w", age=dt.timedelta(minutes=1))
    plan = plan_over(moto_server.url, dataset(*pair, kind="checkpoint", rpo="15m"))
    result = run(plan, "data.checkpoint_fresh")
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert row(result)["newest_at_dr"] is None and "ds has none" in result.summary


def test_no_checkpoint_dataset_is_not_applicable(
    moto_server: MotoServer, pair: tuple[str, str]
) -> None:
    result = run(plan_over(moto_server.url, dataset(*pair)), "data.checkpoint_fresh")
    assert result.status is Status.PASS and "not applicable" in result.summary


# -- data.delete_protection ---------------------------------------------------------------


def protection(moto_server: MotoServer, pair: tuple[str, str], **more: Any) -> CheckResult:
    return run(plan_over(moto_server.url, dataset(*pair, **more)), "data.delete_protection")


def violations(result: CheckResult) -> dict[str, int]:
    return {kind: n for kind, n in result.evidence["violations"].items() if n}


def test_versioned_retained_and_untouched_passes(
    s3: Any, moto_server: MotoServer, pair: tuple[str, str]
) -> None:
    for key in ("p/a", "p/b"):
        for bucket in pair:
            s3.put_object(Bucket=bucket, Key=key, Body=b"1")
    s3.delete_object(Bucket=pair[0], Key="p/b")  # deleted at the primary, kept at DR
    result = protection(moto_server, pair, min_versions=2)
    assert (result.status, result.blocking) == (Status.PASS, False), result.summary
    assert row(result)["versioning"] == "Enabled" and row(result)["lifecycle_rules"] == 1


def test_suspended_versioning_fails(
    s3: Any, moto_server: MotoServer, pair: tuple[str, str]
) -> None:
    s3.put_bucket_versioning(Bucket=pair[1], VersioningConfiguration={"Status": "Suspended"})
    result = protection(moto_server, pair)
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert violations(result) == {"versioning_not_enabled": 1}
    assert row(result)["examples"]["versioning_not_enabled"] == [
        {"bucket": pair[1], "status": "Suspended"}
    ]
    assert "put-bucket-versioning" in result.remediation


def test_aggressive_lifecycle_fails(
    s3: Any, moto_server: MotoServer, pair: tuple[str, str]
) -> None:
    rules = [
        {
            "ID": "purge-old",
            "Status": "Enabled",
            "Filter": {"Prefix": ""},
            "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
        },
        {
            "ID": "expire",
            "Status": "Enabled",
            "Filter": {"Prefix": "p/tmp/"},
            "Expiration": {"Days": 7},
        },
        {
            "ID": "other",
            "Status": "Enabled",
            "Filter": {"Prefix": "logs/"},
            "Expiration": {"Days": 1},
        },
    ]
    s3.put_bucket_lifecycle_configuration(Bucket=pair[1], LifecycleConfiguration={"Rules": rules})
    result = protection(moto_server, pair, min_versions=3)
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert violations(result) == {"lifecycle_expires_noncurrent": 1, "lifecycle_expires_current": 1}
    examples = row(result)["examples"]
    assert examples["lifecycle_expires_noncurrent"][0]["rule"] == "purge-old"
    assert examples["lifecycle_expires_current"][0]["rule"] == "expire"


@pytest.mark.parametrize(
    ("days", "newer", "min_versions", "allowed"),
    [
        (30, None, 3, True),  # every old version kept a month
        (1, None, 3, False),
        (1, 2, 3, True),  # current + 2 non-current always kept
        (1, 1, 3, False),
        (29, 1, 2, True),
        (29, None, 2, False),
    ],
)
def test_noncurrent_expiration_rule(
    days: int, newer: int | None, min_versions: int, allowed: bool
) -> None:
    """moto drops NewerNoncurrentVersions, so the rule itself is tested here."""
    rule = LifecycleRule("r", True, "", False, False, days, newer)
    plan_ds = plan_over(
        "http://127.0.0.1:9", dataset("a-bucket", "b-bucket", min_versions=min_versions)
    )
    assert (data_protection.rule_problems(rule, plan_ds.datasets[0]) == []) is allowed


def test_delete_marker_at_dr_fails(s3: Any, moto_server: MotoServer, pair: tuple[str, str]) -> None:
    for bucket in pair:
        s3.put_object(Bucket=bucket, Key="p/live", Body=b"1")
    s3.delete_object(Bucket=pair[1], Key="p/live")
    result = protection(moto_server, pair)
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert violations(result) == {"delete_marker_at_dr": 1}
    assert row(result)["examples"]["delete_marker_at_dr"][0]["key"] == "p/live"


def test_delete_that_propagated_to_dr_fails(
    s3: Any, moto_server: MotoServer, pair: tuple[str, str]
) -> None:
    for bucket in pair:
        s3.put_object(Bucket=bucket, Key="p/replicated-delete", Body=b"1")
        s3.delete_object(Bucket=bucket, Key="p/replicated-delete")
    s3.put_object(Bucket=pair[0], Key="p/purged-at-dr", Body=b"1")
    s3.delete_object(Bucket=pair[0], Key="p/purged-at-dr")
    result = protection(moto_server, pair)
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert violations(result) == {"delete_propagated": 2}
    examples = row(result)["examples"]["delete_propagated"]
    assert [(e["key"], e["dr"]) for e in examples] == [
        ("p/purged-at-dr", "no version"),
        ("p/replicated-delete", "delete marker"),
    ]
    assert "DeleteMarkerReplication" in result.remediation


def test_an_object_written_at_dr_in_the_second_of_t0_counts_as_written_since(
    moto_server: MotoServer, pair: tuple[str, str]
) -> None:
    """S3 lists LastModified in whole seconds: an object written 0.3 s after T0, in the
    same second, is listed as before T0; the failback's count of DR writes keeps it."""
    from drills.checks.areas.wayback import reverse_sync
    from drills.plan.reverse import reversed_plan

    put(pair[1], "p/at-dr.bin", b"written at DR")
    plan = plan_over(moto_server.url, dataset(*pair))
    reverse = reversed_plan(plan)
    with Targets(reverse, reverse=True) as targets:
        listed = next(iter(targets.primary.objects.objects(pair[1], "p/")))
        assert listed.last_modified.microsecond == 0  # as S3 lists it
        t0 = listed.last_modified + dt.timedelta(microseconds=700_000)
        now = t0 + dt.timedelta(seconds=1)
        row = reverse_sync(targets, reverse.datasets[0], since=t0, now=now)
        assert row.written_at_dr == 1 and row.bytes_written_at_dr == len(b"written at DR")
        later = reverse_sync(targets, reverse.datasets[0], since=t0 + dt.timedelta(seconds=1),
                             now=now)  # fmt: skip
        assert later.written_at_dr == 0  # a second later than its write: not since
