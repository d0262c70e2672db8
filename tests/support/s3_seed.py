"""Fill buckets on the test session's moto server, quickly and with realistic dates.

Buckets are made through the S3 API, so their configuration is what a client
sees; objects are written into moto's backend in this process (the moto_server
fixture runs here), which is fast and lets a test date an object in the past,
as the lab's seeder does.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import uuid
from typing import Any

import boto3

from drills.targets.aws import AwsEndpoint
from drills.targets.objects import ListingLimits, ObjectStore
from drills_lab.moto_server import MotoServer
from drills_lab.seed_aws import ACCOUNT

REGION = "us-east-1"


def unique_bucket(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:12]}"


def s3_client(moto: MotoServer) -> Any:
    return boto3.client("s3", endpoint_url=moto.url, region_name=REGION)


def make_bucket(s3: Any, name: str, *, versioned: bool = False) -> str:
    s3.create_bucket(Bucket=name)
    if versioned:
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


def put(
    bucket: str,
    key: str,
    body: bytes,
    *,
    age: dt.timedelta | None = None,
    etag: str | None = None,
    sha256_of: bytes | None = None,
) -> None:
    """Write one object version, ``age`` old; ``etag`` forces a (multipart-style) ETag and
    ``sha256_of`` stores the full-object SHA-256 checksum of those bytes."""
    from moto.s3.models import s3_backends

    stored = s3_backends[ACCOUNT]["aws"].put_object(bucket, key, body, etag=etag)
    if age is not None:
        stored.last_modified = (dt.datetime.now(dt.UTC) - age).replace(tzinfo=None)
    if sha256_of is not None:
        stored.checksum_algorithm = "SHA256"
        stored.checksum_value = base64.b64encode(hashlib.sha256(sha256_of).digest()).decode()


def multipart_etag(body: bytes, parts: int) -> str:
    return f"{hashlib.md5(body).hexdigest()}-{parts}"  # the ETag's own algorithm


def store(url: str, role: str = "primary", **kwargs: Any) -> ObjectStore:
    where = AwsEndpoint(REGION, url, "testing", "testing")
    return ObjectStore(where, role, **kwargs)


def small_limits(page: int = 3, shards: int = 2, pages: int = 1) -> ListingLimits:
    return ListingLimits(page_size=page, shards_ahead=shards, pages_per_shard=pages)
