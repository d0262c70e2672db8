"""data.replicated from S3 Inventory reports, written by the lab's writer on the session's moto."""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from drills.checks.base import Status
from drills.errors import PlanError
from drills.plan import DrillPlan, load_plan
from drills_lab import topology
from drills_lab.inventory import LAB_CONFIG_ID, inventory_bucket, write_inventory
from drills_lab.runtime import LabInfo
from tests.checks.test_data import HOUR, dataset, plan_over, row
from tests.support.checks import run_check as run
from tests.support.cli import drills_process
from tests.support.s3_seed import make_bucket, put

FORMATS = ("CSV", "Parquet")
DAY = dt.timedelta(days=1)


def inventory_plan(endpoint: str, pair: tuple[str, str], **more: Any) -> DrillPlan:
    inv = {
        "config_id": LAB_CONFIG_ID,
        "schedule": "Daily",
        "primary": {"bucket": inventory_bucket(pair[0]), "prefix": "inventory/"},
        "dr": {"bucket": inventory_bucket(pair[1]), "prefix": "inventory/"},
        **more,
    }
    return plan_over(endpoint, dataset(*pair, inventory=inv))


def publish(s3: Any, pair: tuple[str, str], fmt: str, **kwargs: Any) -> None:
    for bucket in pair:
        if not _exists(s3, inventory_bucket(bucket)):
            make_bucket(s3, inventory_bucket(bucket))
        write_inventory(s3, bucket, file_format=fmt, **kwargs)


def _exists(s3: Any, bucket: str) -> bool:
    return any(b["Name"] == bucket for b in s3.list_buckets()["Buckets"])


def seed(pair: tuple[str, str], count: int, *, missing: int, different: int) -> None:
    for i in range(count):
        key, body = f"p/obj-{i:04d}", b"%08d" % i
        put(pair[0], key, body, age=2 * HOUR)
        if i < missing:
            continue
        put(pair[1], key, b"X%07d" % i if i < missing + different else body, age=2 * HOUR)


@pytest.mark.parametrize("fmt", FORMATS)
def test_inventory_pass(moto_server: Any, s3: Any, pair: tuple[str, str], fmt: str) -> None:
    seed(pair, 30, missing=0, different=0)
    put(pair[0], "elsewhere/outside", b"not in the dataset", age=2 * HOUR)
    publish(s3, pair, fmt)
    result = run(inventory_plan(moto_server.url, pair), "data.replicated")
    assert result.status is Status.PASS, result.summary
    found = row(result)
    assert (found["primary_objects"], found["matched"], found["missing"]) == (30, 30, 0)
    assert found["inventory"]["reports"]["primary"]["format"] == fmt
    assert found["inventory"]["stale"] is False
    assert "from inventory" in result.summary


@pytest.mark.parametrize("fmt", FORMATS)
def test_inventory_finds_missing_and_mismatched(
    moto_server: Any, s3: Any, pair: tuple[str, str], fmt: str
) -> None:
    seed(pair, 40, missing=3, different=2)
    publish(s3, pair, fmt)
    result = run(inventory_plan(moto_server.url, pair), "data.replicated")
    assert (result.status, result.blocking) == (Status.FAIL, True)
    found = row(result)
    assert (found["missing"], found["mismatched"], found["matched"]) == (3, 2, 35)
    assert [e["key"] for e in found["examples"]["missing"]] == [f"p/obj-{i:04d}" for i in range(3)]
    assert found["examples"]["mismatched"][0]["reason"] == "etag"
    assert "(3 missing, 2 differ)" in result.summary


def test_stale_inventory_warns(moto_server: Any, s3: Any, pair: tuple[str, str]) -> None:
    seed(pair, 5, missing=0, different=0)
    publish(s3, pair, "CSV", created=dt.datetime.now(dt.UTC) - 2 * DAY)
    result = run(inventory_plan(moto_server.url, pair), "data.replicated")
    assert result.status is Status.WARN, result.summary
    assert result.summary.startswith("Inventory reports older than their schedule: ds 2 d old")
    assert row(result)["inventory"]["not_covered_after"] is not None


def test_recent_partitions_are_listed(moto_server: Any, s3: Any, pair: tuple[str, str]) -> None:
    """Objects written after the reports, under today's partition, are still compared."""
    publish(s3, pair, "Parquet", created=dt.datetime.now(dt.UTC) - 3 * HOUR)
    today = dt.datetime.now(dt.UTC).strftime("%Y/%m/%d")
    put(pair[0], f"p/{today}/new-a", b"a", age=2 * HOUR)  # DR lacks it: missing
    put(pair[0], f"p/{today}/new-b", b"b", age=2 * HOUR)
    put(pair[1], f"p/{today}/new-b", b"b", age=2 * HOUR)
    plan = inventory_plan(moto_server.url, pair, recent_layout="%Y/%m/%d/")
    result = run(plan, "data.replicated")
    assert result.status is Status.FAIL, result.summary
    found = row(result)
    assert (found["primary_objects"], found["missing"], found["matched"]) == (2, 1, 1)
    assert found["examples"]["missing"][0]["key"] == f"p/{today}/new-a"
    assert f"p/{today}/" in found["inventory"]["recent_listed"]


def _bad_manifest(s3: Any, bucket: str, source: str, body: bytes) -> None:
    make_bucket(s3, inventory_bucket(source))
    root = f"inventory/{source}/{LAB_CONFIG_ID}/2030-01-01T00-00Z/"
    s3.put_object(Bucket=bucket, Key=root + "manifest.json", Body=body)
    s3.put_object(
        Bucket=bucket, Key=root + "manifest.checksum", Body=hashlib.md5(body).hexdigest().encode()
    )


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{not json", "not JSON"),
        (b'{"sourceBucket": "x", "fileFormat": "ORC"}', "fileFormat 'ORC' is not read"),
        (
            b'{"sourceBucket": "x", "fileFormat": "CSV", "creationTimestamp": "1", '
            b'"fileSchema": "Bucket, Key", "files": [{"key": "k"}]}',
            "fileSchema lacks Size, ETag",
        ),
    ],
)
def test_malformed_manifest_is_a_clear_error(
    moto_server: Any, s3: Any, pair: tuple[str, str], body: bytes, says: str
) -> None:
    for bucket in pair:
        _bad_manifest(s3, inventory_bucket(bucket), bucket, body)
    result = run(inventory_plan(moto_server.url, pair), "data.replicated")
    assert result.status is Status.ERROR, result.summary
    assert "is not an S3 Inventory manifest" in result.summary and says in result.summary


def test_no_report_names_where_it_looked(moto_server: Any, s3: Any, pair: tuple[str, str]) -> None:
    for bucket in pair:
        make_bucket(s3, inventory_bucket(bucket))
    result = run(inventory_plan(moto_server.url, pair), "data.replicated")
    assert result.status is Status.ERROR
    assert f"no inventory report under s3://{inventory_bucket(pair[0])}/inventory/" in (
        result.summary
    )


@pytest.mark.parametrize(
    ("more", "says"),
    [
        ({"recent_layout": "%Y/%H/"}, "needs %Y, %m and %d"),
        ({"recent_layout": "%Y-%m-%d"}, "must end with /"),
        ({"schedule": "Hourly"}, "Daily"),
        ({"config_id": "no spaces"}, "config_id"),
    ],
)
def test_inventory_plan_errors(more: dict[str, Any], says: str) -> None:
    with pytest.raises(PlanError) as caught:
        inventory_plan("http://127.0.0.1:1", ("a-bucket", "b-bucket"), **more)
    assert says in str(caught.value)


def test_lab_publishes_inventories_the_check_reads(lab: LabInfo) -> None:
    """`drills lab inventory` writes every lab bucket's report; the lab plan with
    `inventory:` on each dataset then passes from the reports."""
    state = Path(lab.state_dir)
    done = drills_process(
        ["lab", "inventory", "--state-dir", str(state), "--format", "Parquet"], timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.split()) == 2 * len(topology.DATASETS)
    doc = yaml.safe_load((state / "plan.yaml").read_text())
    for ds in doc["datasets"]:
        ds["inventory"] = {
            "config_id": LAB_CONFIG_ID,
            "primary": {"bucket": inventory_bucket(ds["primary_bucket"]), "prefix": "inventory/"},
            "dr": {"bucket": inventory_bucket(ds["dr_bucket"]), "prefix": "inventory/"},
        }
    path = state / f"inventory-plan-{uuid.uuid4().hex[:8]}.yaml"
    path.write_text(yaml.safe_dump(doc))
    try:
        result = run(load_plan(path), "data.replicated")
    finally:
        path.unlink()
    # The trainer may write a checkpoint between the two reports: pending at most.
    assert result.status is Status.PASS, result.summary
    rows = result.evidence["datasets"]
    assert {r["inventory"]["reports"]["dr"]["format"] for r in rows} == {"Parquet"}
    assert sum(r["primary_objects"] for r in rows) >= sum(d.objects for d in topology.DATASETS)
