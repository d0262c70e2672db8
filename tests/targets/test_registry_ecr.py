"""The ECR registry adapter against moto's ECR."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from drills.errors import TemporaryError
from drills.targets.aws import AwsEndpoint
from drills.targets.registry import EcrImages
from drills_lab.images import build_image, push_ecr
from drills_lab.moto_server import MotoServer


@pytest.fixture()
def prefix() -> str:
    return f"ecr-{uuid.uuid4().hex[:8]}"


@pytest.fixture()
def ecr_images(moto_server: MotoServer, aws_env: dict[str, str]) -> Iterator[tuple[EcrImages, Any]]:
    raw = boto3.client("ecr", endpoint_url=moto_server.url, region_name="eu-west-1")
    account = raw.describe_registry()["registryId"]
    images = EcrImages(AwsEndpoint("eu-west-1", moto_server.url), account, name="registry dr")
    yield images, raw
    images.close()


def test_ecr_tag_digest_index_and_missing(ecr_images: tuple[EcrImages, Any], prefix: str) -> None:
    images, raw = ecr_images
    single = build_image(f"{prefix}/ecr-app:1.0")
    index = build_image(f"{prefix}/ecr-multi:2.0", multi_arch=True)
    for image in (single, index):
        push_ecr(raw, image)
    truth = {  # what ECR itself reports for each tag
        image.repository: raw.describe_images(
            repositoryName=image.repository, imageIds=[{"imageTag": image.tag}]
        )["imageDetails"][0]["imageDigest"]
        for image in (single, index)
    }
    found = images.digests(
        [
            (single.repository, single.tag),
            (index.repository, index.tag),
            (single.repository, truth[single.repository]),
            (single.repository, "missing"),
            (f"{prefix}/no-such-repo", "1.0"),
        ]
    )
    assert found == {
        (single.repository, single.tag): truth[single.repository],
        (index.repository, index.tag): truth[index.repository],
        (single.repository, truth[single.repository]): truth[single.repository],
        (single.repository, "missing"): None,
        (f"{prefix}/no-such-repo", "1.0"): None,
    }
    assert images.host.endswith(".dkr.ecr.eu-west-1.amazonaws.com")


def test_ecr_unreachable_is_a_temporary_error(closed_port: str, aws_env: dict[str, str]) -> None:
    images = EcrImages(AwsEndpoint("eu-west-1", f"http://{closed_port}"), "123456789012")
    started = time.monotonic()
    with pytest.raises(TemporaryError, match="registry"):
        images.digest("a/b", "1")
    assert time.monotonic() - started < 5


def test_ecr_hung_endpoint_times_out(blackhole: str, aws_env: dict[str, str]) -> None:
    images = EcrImages(
        AwsEndpoint("eu-west-1", f"http://{blackhole}"), "123456789012", read_timeout=0.3
    )
    started = time.monotonic()
    with pytest.raises(TemporaryError, match="timed out"):
        images.digest("a/b", "1")
    assert time.monotonic() - started < 4
