"""Fixtures of the Data checks' tests: buckets on the session's moto server."""

from __future__ import annotations

from typing import Any

import pytest

from drills_lab.moto_server import MotoServer
from tests.support.s3_seed import make_bucket, s3_client, unique_bucket


@pytest.fixture()
def s3(moto_server: MotoServer, aws_env: dict[str, str]) -> Any:
    return s3_client(moto_server)


@pytest.fixture()
def pair(s3: Any) -> tuple[str, str]:
    """An empty versioned bucket pair; the DR one with the lab's retention rule."""
    primary = make_bucket(s3, unique_bucket("data-p"), versioned=True)
    dr = make_bucket(s3, unique_bucket("data-d"), versioned=True)
    keep = {"NoncurrentDays": 30, "NewerNoncurrentVersions": 5}
    rule = {"ID": "keep", "Status": "Enabled", "Filter": {"Prefix": ""}}
    s3.put_bucket_lifecycle_configuration(
        Bucket=dr,
        LifecycleConfiguration={"Rules": [{**rule, "NoncurrentVersionExpiration": keep}]},
    )
    return primary, dr
