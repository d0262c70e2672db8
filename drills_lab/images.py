"""Synthetic container images for the lab, and pushing them to a registry.

Images are tiny but real OCI artefacts (config, one gzip layer, manifest, and
for some an index over two platforms). They are built deterministically from
their name, so the same image pushed to both sites has the same digest, which
is what the readiness check compares.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
from botocore.exceptions import ClientError

from drills.errors import LabError
from drills_lab import topology
from drills_lab.loopback import loopback_client

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


@dataclass(frozen=True)
class Blob:
    media_type: str
    data: bytes

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.data).hexdigest()

    def descriptor(self, **extra: object) -> dict[str, object]:
        return {
            "mediaType": self.media_type,
            "digest": self.digest,
            "size": len(self.data),
            **extra,
        }


@dataclass(frozen=True)
class Image:
    """An image as it is pushed: blobs first, then the manifests, the top one last."""

    repository: str
    tag: str
    blobs: tuple[Blob, ...]
    manifests: tuple[Blob, ...]  # child manifests before the top-level one

    @property
    def top(self) -> Blob:
        return self.manifests[-1]

    @property
    def reference(self) -> str:
        return f"{self.repository}:{self.tag}"


def _layer(content: str) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        payload = content.encode()
        info = tarfile.TarInfo("etc/image-id")
        info.size = len(payload)
        info.mtime = 0  # deterministic bytes, so both registries compute one digest
        tar.addfile(info, io.BytesIO(payload))
    return gzip.compress(raw.getvalue(), mtime=0)


def _single(reference: str, arch: str, generation: str) -> tuple[list[Blob], Blob]:
    layer = _layer(f"{reference} {arch} {generation}\n")
    config = Blob(
        OCI_CONFIG,
        json.dumps(
            {
                "architecture": arch,
                "os": "linux",
                "config": {"Labels": {"org.opencontainers.image.ref.name": reference}},
                "rootfs": {"type": "layers", "diff_ids": []},
            },
            sort_keys=True,
        ).encode(),
    )
    layer_blob = Blob(OCI_LAYER, layer)
    manifest = Blob(
        OCI_MANIFEST,
        json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": config.descriptor(),
                "layers": [layer_blob.descriptor()],
            },
            sort_keys=True,
        ).encode(),
    )
    return [config, layer_blob], manifest


def build_image(reference: str, *, multi_arch: bool = False, generation: str = "1") -> Image:
    """Build ``repository:tag``; a different ``generation`` gives a different digest."""
    repository, _, tag = reference.rpartition(":")
    if not repository or not tag:
        raise LabError(f"image reference {reference!r} needs repository:tag")
    if not multi_arch:
        blobs, manifest = _single(reference, "amd64", generation)
        return Image(repository, tag, tuple(blobs), (manifest,))
    all_blobs: list[Blob] = []
    children: list[Blob] = []
    entries: list[dict[str, object]] = []
    for arch in ("amd64", "arm64"):
        blobs, manifest = _single(reference, arch, generation)
        all_blobs += blobs
        children.append(manifest)
        entries.append(manifest.descriptor(platform={"architecture": arch, "os": "linux"}))
    index = Blob(
        OCI_INDEX,
        json.dumps(
            {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}, sort_keys=True
        ).encode(),
    )
    return Image(repository, tag, tuple(all_blobs), (*children, index))


def push_oci(client: httpx.Client, base_url: str, image: Image) -> str:
    """Push to an OCI Distribution v2 registry; returns the top manifest digest."""
    repo = image.repository
    for blob in image.blobs:
        if client.head(f"{base_url}/v2/{repo}/blobs/{blob.digest}").status_code == 200:
            continue
        start = client.post(f"{base_url}/v2/{repo}/blobs/uploads/")
        _expect(start, 202, f"start upload to {repo}")
        location = start.headers["Location"]
        if location.startswith("/"):
            location = base_url + location
        sep = "&" if "?" in location else "?"
        done = client.put(
            f"{location}{sep}digest={blob.digest}",
            content=blob.data,
            headers={"Content-Type": "application/octet-stream"},
        )
        _expect(done, 201, f"upload blob to {repo}")
    for manifest in image.manifests[:-1]:
        _put_manifest(client, base_url, repo, manifest.digest, manifest)
    _put_manifest(client, base_url, repo, image.tag, image.top)
    return image.top.digest


def _put_manifest(
    client: httpx.Client, base_url: str, repo: str, reference: str, manifest: Blob
) -> None:
    response = client.put(
        f"{base_url}/v2/{repo}/manifests/{reference}",
        content=manifest.data,
        headers={"Content-Type": manifest.media_type},
    )
    _expect(response, 201, f"put manifest {repo}:{reference}")


def _expect(response: httpx.Response, status: int, what: str) -> None:
    if response.status_code != status:
        raise LabError(f"{what}: registry answered {response.status_code}: {response.text[:200]}")


def push_ecr(ecr: Any, image: Image) -> str:
    """Put the image's manifests into ECR (moto keeps manifests, not blobs)."""
    try:
        ecr.create_repository(repositoryName=image.repository)
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "RepositoryAlreadyExistsException":
            raise
    for child in image.manifests[:-1]:
        ecr.put_image(
            repositoryName=image.repository,
            imageManifest=child.data.decode(),
            imageManifestMediaType=child.media_type,
            imageDigest=child.digest,
        )
    ecr.put_image(
        repositoryName=image.repository,
        imageManifest=image.top.data.decode(),
        imageManifestMediaType=image.top.media_type,
        imageTag=image.tag,
        # Without it moto invents a digest for an index, and the sites would differ.
        imageDigest=image.top.digest,
    )
    return image.top.digest


def push_lab_images(
    sites: list[str], registries: dict[str, str], ecr: dict[str, Any], *, drift: bool
) -> None:
    """Every image of the lab's workloads pushed to each site's registry: an OCI registry's
    URL in ``registries``, else that site's ECR client in ``ecr``. The drifted lab's DR
    misses one image."""
    refs = [w.image for w in topology.WORKLOADS] + [topology.CONTROLLER_IMAGE]
    jobs = [
        (site, ref)
        for site in sites
        for ref in refs
        if not (drift and site == "dr" and ref == topology.DRIFT_MISSING_IMAGE)
    ]

    def push(job: tuple[str, str]) -> str:
        site, ref = job
        image = build_image(ref, multi_arch=ref in topology.MULTI_ARCH)
        if registries:  # each pushing thread with its own client (drills_lab.loopback)
            return push_oci(loopback_client(), registries[site], image)
        return push_ecr(ecr[site], image)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(push, jobs))
