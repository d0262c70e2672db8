"""S3 Inventory reports for the lab's buckets, written as S3 publishes them.

moto does not run inventory configurations, so `drills lab inventory` lists each lab
bucket and writes what S3 would: the data file (CSV.gz with the key URL-encoded, or
Parquet with S3's column names), ``manifest.json`` and ``manifest.checksum`` under
``PREFIX/SOURCE-BUCKET/CONFIG-ID/YYYY-MM-DDTHH-MMZ/`` of a destination bucket. The
same writer makes the benchmark's reports of ten million rows, straight from DuckDB.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import tempfile
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

CSV_SCHEMA = "Bucket, Key, Size, LastModifiedDate, ETag, StorageClass"
PARQUET_SCHEMA = (
    "message s3.inventory { required binary bucket (STRING); required binary key (STRING); "
    "optional int64 size; optional int64 last_modified_date (TIMESTAMP(MILLIS,true)); "
    "optional binary e_tag (STRING); optional binary storage_class (STRING); }"
)
LAB_CONFIG_ID = "lab-daily"
LAB_PREFIX = "inventory/"


def inventory_bucket(source_bucket: str) -> str:
    """Where the lab publishes a bucket's reports: a destination beside it, same region."""
    return f"{source_bucket}-inventory"


@dataclass(frozen=True)
class Report:
    manifest_key: str
    files: list[tuple[str, Path]]  # (destination key, local file)
    manifest: bytes


def copy_rows(con: duckdb.DuckDBPyConnection, select: str, out: Path, file_format: str) -> None:
    """Write the rows of ``select`` (bucket, key, size, last_modified, etag) as S3 does."""
    if file_format == "CSV":
        query = (
            "SELECT bucket, url_encode(key) AS key, size, "
            "strftime(last_modified, '%Y-%m-%dT%H:%M:%S.%gZ') AS lm, etag, 'STANDARD' "
            f"FROM ({select})"
        )
        con.execute(f"COPY ({query}) TO '{out}' (HEADER false, COMPRESSION gzip, FORCE_QUOTE *)")
    else:
        query = (
            "SELECT bucket, key, size, last_modified AS last_modified_date, etag AS e_tag, "
            f"'STANDARD' AS storage_class FROM ({select})"
        )
        con.execute(f"COPY ({query}) TO '{out}' (FORMAT parquet)")


def build_report(
    files: list[Path],
    *,
    source_bucket: str,
    dest_bucket: str,
    root: str,
    file_format: str,
    created: dt.datetime,
) -> Report:
    """The manifest of data files already written, and where each goes."""
    suffix = ".csv.gz" if file_format == "CSV" else ".parquet"
    placed = [(f"{root}data/{uuid.uuid4()}{suffix}", path) for path in files]
    doc = {
        "sourceBucket": source_bucket,
        "destinationBucket": f"arn:aws:s3:::{dest_bucket}",
        "version": "2016-11-30",
        "creationTimestamp": str(int(created.timestamp() * 1000)),
        "fileFormat": file_format,
        "fileSchema": CSV_SCHEMA if file_format == "CSV" else PARQUET_SCHEMA,
        "files": [
            {"key": key, "size": path.stat().st_size, "MD5checksum": _md5(path)}
            for key, path in placed
        ],
    }
    stamp = created.astimezone(dt.UTC).strftime("%Y-%m-%dT%H-%MZ")
    manifest = json.dumps(doc, indent=2).encode()
    return Report(f"{root}{stamp}/manifest.json", placed, manifest)


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def publish(s3: Any, bucket: str, report: Report) -> None:
    """Upload the data files, then manifest.json, then manifest.checksum, as S3 orders them."""
    for key, path in report.files:
        s3.upload_file(str(path), bucket, key)
    s3.put_object(Bucket=bucket, Key=report.manifest_key, Body=report.manifest)
    checksum = hashlib.md5(report.manifest).hexdigest().encode()
    s3.put_object(
        Bucket=bucket,
        Key=report.manifest_key.removesuffix("manifest.json") + "manifest.checksum",
        Body=checksum,
    )


def _listing(s3: Any, bucket: str) -> Iterable[tuple[str, str, int, dt.datetime, str]]:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", ()):
            yield bucket, o["Key"], o["Size"], o["LastModified"], o["ETag"].strip('"')


def write_inventory(
    s3: Any,
    source_bucket: str,
    *,
    dest_bucket: str | None = None,
    prefix: str = LAB_PREFIX,
    config_id: str = LAB_CONFIG_ID,
    file_format: str = "CSV",
    created: dt.datetime | None = None,
) -> str:
    """List ``source_bucket`` now and publish its report; returns the manifest's s3:// URL."""
    dest = dest_bucket or inventory_bucket(source_bucket)
    created = created or dt.datetime.now(dt.UTC)
    root = f"{prefix}{source_bucket}/{config_id}/"
    with tempfile.TemporaryDirectory(prefix="drills-inventory-") as tmp:
        con = duckdb.connect()
        try:
            con.execute(
                "CREATE TABLE rows (bucket VARCHAR, key VARCHAR, size BIGINT, "
                "last_modified TIMESTAMPTZ, etag VARCHAR)"
            )
            rows = list(_listing(s3, source_bucket))
            if rows:
                con.executemany("INSERT INTO rows VALUES (?, ?, ?, ?, ?)", rows)
            out = Path(tmp) / ("part-0" + (".csv.gz" if file_format == "CSV" else ".parquet"))
            copy_rows(con, "SELECT * FROM rows ORDER BY key", out, file_format)
        finally:
            con.close()
        report = build_report(
            [out], source_bucket=source_bucket, dest_bucket=dest, root=root,
            file_format=file_format, created=created,
        )  # fmt: skip
        publish(s3, dest, report)
    return f"s3://{dest}/{report.manifest_key}"


def lab_client(state_dir: Path, endpoint: str, region: str) -> Any:
    """An S3 client of the running lab, with the credentials it wrote in its state dir."""
    import boto3

    creds = state_dir / "aws"
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id=(creds / "access_key_id").read_text().strip(),
        aws_secret_access_key=(creds / "secret_access_key").read_text().strip(),
    )


def publish_lab(state_dir: Path, endpoint: str, file_format: str) -> list[str]:
    """A report of every lab bucket, each in its own ``BUCKET-inventory`` destination."""
    from drills_lab import topology

    published = []
    for ds in topology.DATASETS:
        for bucket, region in (
            (ds.primary_bucket, topology.PRIMARY_REGION),
            (ds.dr_bucket, topology.DR_REGION),
        ):
            s3 = lab_client(state_dir, endpoint, region)
            dest = inventory_bucket(bucket)
            try:
                s3.head_bucket(Bucket=dest)
            except s3.exceptions.ClientError:
                where = {} if region == "us-east-1" else {
                    "CreateBucketConfiguration": {"LocationConstraint": region}
                }  # fmt: skip
                s3.create_bucket(Bucket=dest, **where)
            published.append(write_inventory(s3, bucket, file_format=file_format))
    return published
