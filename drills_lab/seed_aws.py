"""Seed the lab's AWS side on moto: versioned bucket pairs, replicated objects, secrets.

moto stores a replication configuration but never replicates, so the lab
copies primary objects to DR itself, as S3 replication would have. Objects are
dated in moto's in-process backend, because an RPO check is only meaningful
against objects of realistic age.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from typing import Any

from drills_lab import topology
from drills_lab.topology import LabDataset

ACCOUNT = "123456789012"
CHECKPOINT_EVERY = dt.timedelta(minutes=30)


def body_of(dataset: LabDataset, key: str, size: int = 512) -> bytes:
    seed = hashlib.sha256(f"{dataset.name}/{key}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def dataset_keys(dataset: LabDataset) -> list[str]:
    if dataset.kind == "checkpoint":
        return [
            f"{dataset.prefix}step-{(i + 1) * 100:06d}/model.safetensors"
            for i in range(dataset.objects)
        ]
    if dataset.kind == "model":
        return [
            f"{dataset.prefix}v{i // 2 + 1}/{'weights.bin' if i % 2 else 'config.json'}"
            for i in range(dataset.objects)
        ]
    return [f"{dataset.prefix}shard-{i:05d}.jsonl" for i in range(dataset.objects)]


def _age(dataset: LabDataset, index: int) -> dt.timedelta:
    """How old the index-th object is: checkpoints every 30 min, the newest 5 min ago."""
    if dataset.kind == "checkpoint":
        return CHECKPOINT_EVERY * (dataset.objects - 1 - index) + dt.timedelta(minutes=5)
    return dt.timedelta(hours=2, minutes=dataset.objects - index)


def _prepare_bucket(s3: Any, bucket: str, region: str, *, dr: bool) -> None:
    config = (
        {}
        if region == "us-east-1"
        else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    )
    s3.create_bucket(Bucket=bucket, **config)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    if dr:
        # Keep recent non-current versions: the DR copy is the one that must survive a bad delete.
        s3.put_bucket_lifecycle_configuration(
            Bucket=bucket,
            LifecycleConfiguration={
                "Rules": [
                    {
                        "ID": "keep-noncurrent",
                        "Status": "Enabled",
                        "Filter": {"Prefix": ""},
                        "NoncurrentVersionExpiration": {
                            "NoncurrentDays": 30,
                            "NewerNoncurrentVersions": 5,
                        },
                    }
                ]
            },
        )


def write_versions(bucket: str, key: str, body: bytes, when: dt.datetime) -> None:
    """Write two versions straight into moto's in-process backend, dated ``when``.

    Over HTTP the same seeding costs seconds; the buckets themselves are still
    made through the API above, so their configuration is what a client sees.
    """
    from moto.s3.models import s3_backends

    backend = s3_backends[ACCOUNT]["aws"]
    for generation in (b"v0", b""):  # DR must have history to fall back on
        stored = backend.put_object(bucket, key, generation + body)
        stored.last_modified = when.astimezone(dt.UTC).replace(tzinfo=None)


def seed_datasets(primary_s3: Any, dr_s3: Any, *, drift: bool) -> None:
    """Create the versioned bucket pairs and replicate primary objects to DR.

    Needs moto running in this process (the lab daemon's case).
    """
    now = dt.datetime.now(dt.UTC)
    for ds in topology.DATASETS:
        _prepare_bucket(primary_s3, ds.primary_bucket, topology.PRIMARY_REGION, dr=False)
        _prepare_bucket(dr_s3, ds.dr_bucket, topology.DR_REGION, dr=True)
        stale = drift and ds.name == topology.DRIFT_STALE_DATASET
        for index, key in enumerate(dataset_keys(ds)):
            written = now - _age(ds, index)
            write_versions(ds.primary_bucket, key, body_of(ds, key), written)
            if stale and now - written < dt.timedelta(seconds=topology.DRIFT_STALE_AGE_S):
                continue  # replication stopped six hours ago
            # Replication lands a little after the primary write.
            write_versions(ds.dr_bucket, key, body_of(ds, key), written + dt.timedelta(seconds=20))


def seed_aws_secrets(primary_sm: Any, value: str) -> None:
    for name in topology.AWS_SECRETS:
        primary_sm.create_secret(
            Name=name,
            SecretString=value,
            AddReplicaRegions=[{"Region": topology.DR_REGION}],
        )


def seed_route53(r53: Any, *, drift: bool) -> str:
    """The lab's hosted zone in moto's Route 53, its record at the primary; the zone's id.
    The drifted lab's TTL is too long for the RTO."""
    zone = r53.create_hosted_zone(Name=topology.ZONE, CallerReference=str(time.time()))
    zone_id: str = zone["HostedZone"]["Id"].split("/")[-1]
    change = {
        "Action": "UPSERT",
        "ResourceRecordSet": {
            "Name": topology.RECORD,
            "Type": "A",
            "TTL": topology.DRIFT_TTL if drift else topology.GOOD_TTL,
            "ResourceRecords": [{"Value": topology.PRIMARY_ADDR}],
        },
    }
    r53.change_resource_record_sets(HostedZoneId=zone_id, ChangeBatch={"Changes": [change]})
    return zone_id
