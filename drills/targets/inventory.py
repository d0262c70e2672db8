"""S3 Inventory reports: find the newest one of a bucket, read its manifest, fetch its files.

S3 publishes each report under the configuration's destination::

    PREFIX/SOURCE-BUCKET/CONFIG-ID/YYYY-MM-DDTHH-MMZ/manifest.json
    PREFIX/SOURCE-BUCKET/CONFIG-ID/YYYY-MM-DDTHH-MMZ/manifest.checksum   (MD5 of manifest.json)
    PREFIX/SOURCE-BUCKET/CONFIG-ID/data/....csv.gz | .parquet
    PREFIX/SOURCE-BUCKET/CONFIG-ID/hive/dt=YYYY-MM-DD-HH-MM/symlink.txt

``manifest.json`` names the source and destination buckets, the format version, when
the scan began (``creationTimestamp``, milliseconds since the epoch, as a string), the
``fileFormat`` (CSV, ORC or Parquet), the ``fileSchema`` (the CSV fields in order, or the
Parquet message type) and the data ``files`` with their key, size and ``MD5checksum``.
S3 writes ``manifest.checksum`` last, so a report without one is still being written:
the newest complete report is the one used.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drills.errors import PermanentError
from drills.targets.objects import ObjectStore

MANIFEST_LIMIT = 64 * 1024 * 1024  # a manifest of 100 million objects names some thousand files
FORMATS = ("CSV", "Parquet")
_REPORT_DIR = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}Z)/$")
# The fields a comparison needs, as CSV names them and as the Parquet schema does.
NEEDED = {"Key": "key", "Size": "size", "ETag": "e_tag"}
OPTIONAL = {
    "LastModifiedDate": "last_modified_date",
    "IsLatest": "is_latest",
    "IsDeleteMarker": "is_delete_marker",
}
_PARQUET_FIELD = re.compile(r"\b(?:required|optional|repeated)\s+\w+\s+(\w+)")


@dataclass(frozen=True)
class InventoryFile:
    key: str
    size: int
    md5: str


@dataclass(frozen=True)
class Manifest:
    """One published inventory report."""

    bucket: str  # the destination bucket, where the report's files are
    key: str  # of manifest.json
    source_bucket: str
    created: dt.datetime  # when S3 began scanning the source bucket
    file_format: str  # CSV | Parquet
    fields: tuple[str, ...]  # CSV: the columns in order; Parquet: the column names
    files: tuple[InventoryFile, ...]

    @property
    def where(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def has(self, csv_name: str) -> bool:
        return self.column(csv_name) in self.fields

    def column(self, csv_name: str) -> str:
        """The field's name in this report's format."""
        if self.file_format == "CSV":
            return csv_name
        return {**NEEDED, **OPTIONAL}[csv_name]


def report_root(dest_prefix: str, source_bucket: str, config_id: str) -> str:
    return f"{dest_prefix}{source_bucket}/{config_id}/"


def _bad(target: str, where: str, what: str) -> PermanentError:
    return PermanentError(target, f"{where} is not an S3 Inventory manifest: {what}")


def _text(doc: dict[str, Any], name: str, fail: Any) -> str:
    value = doc.get(name)
    if not isinstance(value, str) or not value:
        raise fail(f"{name!r} missing or not a string")
    return value


def _fields(file_format: str, schema: str) -> tuple[str, ...]:
    if file_format == "CSV":
        return tuple(part.strip() for part in schema.split(","))
    return tuple(_PARQUET_FIELD.findall(schema))


def _files(doc: dict[str, Any], fail: Any) -> tuple[InventoryFile, ...]:
    files = doc.get("files")
    if not isinstance(files, list) or not files:
        raise fail("'files' missing or empty")
    found = []
    for entry in files:
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
            raise fail("an entry of 'files' has no 'key'")
        found.append(
            InventoryFile(
                entry["key"], int(entry.get("size") or 0), str(entry.get("MD5checksum", ""))
            )
        )
    return tuple(found)


def parse_manifest(raw: bytes, bucket: str, key: str, target: str) -> Manifest:
    """A manifest.json's content, checked for what a comparison needs, or one clear error."""
    where = f"s3://{bucket}/{key}"

    def fail(what: str) -> PermanentError:
        return _bad(target, where, what)

    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise fail(f"not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise fail("not a JSON object")
    file_format = _text(doc, "fileFormat", fail)
    if file_format not in FORMATS:
        raise fail(f"fileFormat {file_format!r} is not read (only {' or '.join(FORMATS)})")
    stamp = _text(doc, "creationTimestamp", fail)
    if not stamp.isdigit():
        raise fail(f"creationTimestamp {stamp!r} is not milliseconds since the epoch")
    fields = _fields(file_format, _text(doc, "fileSchema", fail))
    manifest = Manifest(
        bucket=bucket,
        key=key,
        source_bucket=_text(doc, "sourceBucket", fail),
        created=dt.datetime.fromtimestamp(int(stamp) / 1000, dt.UTC),
        file_format=file_format,
        fields=fields,
        files=_files(doc, fail),
    )
    absent = [name for name in NEEDED if not manifest.has(name)]
    if absent:
        raise fail(f"fileSchema lacks {', '.join(absent)}, which a comparison needs")
    return manifest


def latest_manifest(store: ObjectStore, bucket: str, root: str, source_bucket: str) -> Manifest:
    """The newest complete report under ``root`` (``PREFIX/SOURCE/CONFIG-ID/``)."""
    reports = sorted(
        (p for p in store.subdirectories(bucket, root) if _REPORT_DIR.search(p)), reverse=True
    )
    if not reports:
        raise PermanentError(
            store.target,
            f"no inventory report under s3://{bucket}/{root} (expected "
            "YYYY-MM-DDTHH-MMZ/manifest.json there: is the inventory configuration's "
            "destination, prefix and id right, and has S3 published a first report?)",
        )
    for report in reports:
        try:
            checksum = store.read(bucket, f"{report}manifest.checksum", limit=1024)
        except PermanentError:
            continue  # no checksum yet: S3 is still writing this report
        raw = store.read(bucket, f"{report}manifest.json", limit=MANIFEST_LIMIT)
        key = f"{report}manifest.json"
        expected = (
            checksum.decode("ascii", "replace").split()[0].lower() if checksum.strip() else ""
        )
        if hashlib.md5(raw).hexdigest() != expected:
            raise _bad(
                store.target, f"s3://{bucket}/{key}", "its MD5 differs from manifest.checksum"
            )
        manifest = parse_manifest(raw, bucket, key, store.target)
        if manifest.source_bucket != source_bucket:
            raise _bad(
                store.target,
                manifest.where,
                f"it reports bucket {manifest.source_bucket!r}, not {source_bucket!r}",
            )
        return manifest
    raise PermanentError(
        store.target, f"no complete inventory report under s3://{bucket}/{root} "
        "(no manifest.checksum beside any manifest.json)",
    )  # fmt: skip


def fetch_files(store: ObjectStore, manifest: Manifest, into: Path) -> list[Path]:
    """Download the report's data files into ``into``, checking each one's MD5."""
    into.mkdir(parents=True, exist_ok=True)
    paths = []
    for n, entry in enumerate(manifest.files):
        suffix = ".parquet" if manifest.file_format == "Parquet" else ".csv.gz"
        path = into / f"{n:06d}{suffix}"
        md5 = store.download(manifest.bucket, entry.key, str(path))
        if entry.md5 and md5 != entry.md5.lower():
            raise _bad(
                store.target, manifest.where, f"file {entry.key} does not match its MD5checksum"
            )
        paths.append(path)
    return paths
