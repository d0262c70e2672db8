"""Checkpoints of the history's chain, signed with the evidence key and kept outside the
store: in a directory, or in an S3 bucket (with Object Lock where the bucket has it).

The store keeps its own (drills.store.checkpoints); copies where its owner cannot rewrite
them are what show a chain cut short, or rebuilt, after the fact. One file (one object) a
checkpoint, ``PLAN/LENGTH-HEAD.json``, never overwritten.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from drills.errors import DrillError
from drills.evidence.keys import Verifier, configured_reference, load_signer
from drills.plan.files import read_regular_file
from drills.store.checkpoints import Checkpoint, Sign
from drills.store.history import HistoryStore
from drills.store.meta import newest_checkpoint, read_note, write_note

MAX_CHECKPOINT_BYTES = 64 * 1024  # a checkpoint is a few hundred bytes
RETAIN_DAYS = 400  # Object Lock retention when the bucket sets none: over a year of drills


class CheckpointPlaceError(DrillError):
    """A place for checkpoints that cannot be read or written."""


def configured_sign(base_dir: Path | None = None) -> Sign | None:
    """Signs checkpoints with the key ``DRILLS_SIGNING_KEY`` names (None: none configured).
    The key is read on the first checkpoint, not before: most commands never write one."""
    ref = configured_reference()
    if ref is None:
        return None
    loaded: list[Any] = []

    def sign(message: bytes) -> tuple[str, bytes]:
        if not loaded:
            loaded.append(load_signer(ref, base_dir))
        return loaded[0].keyid, loaded[0].sign(message)

    return sign


def signed_history(url: str | None = None) -> HistoryStore:
    """The history store, its checkpoints signed with the configured evidence key."""
    return HistoryStore(url, sign=configured_sign())


EXPORTED_KEY = "checkpoints_exported_at"  # evidence_meta: when they were last copied out
EXPORT_EVERY = dt.timedelta(days=1)


def export_if_due(
    store: HistoryStore, places: Mapping[str, str], *, now: dt.datetime | None = None
) -> int | None:
    """Copy each plan's checkpoint to the place its plan names (plan -> place), once a day
    at most, for a caller that runs far more often (the readiness deployment); None when
    not due. Returns the checkpoints written."""
    now = now or dt.datetime.now(dt.UTC)
    last = read_note(store, EXPORTED_KEY)
    if last is not None and now - dt.datetime.fromisoformat(last) < EXPORT_EVERY:
        return None
    written = 0
    for plan, place in sorted(places.items()):
        written += write_checkpoints(place, store.take_checkpoints([plan]))
    write_note(store, EXPORTED_KEY, now.isoformat())
    return written


def signature_problem(cp: Checkpoint, verifier: Verifier) -> str | None:
    """Why ``cp`` is not signed by ``verifier``'s key, or None when it is."""
    if cp.signature is None:
        return "unsigned, though a public key was given"
    try:
        signature = base64.b64decode(cp.signature, validate=True)
    except (binascii.Error, ValueError):
        return "its signature is not base64"
    if not verifier.verify(signature, cp.payload()):
        return f"its signature does not hold for key {verifier.keyid}"
    return None


def object_name(cp: Checkpoint) -> str:
    return f"{quote(cp.plan, safe='')}/{cp.length:010d}-{cp.head_sha256[:16]}.json"


def _encoded(cp: Checkpoint) -> bytes:
    return json.dumps(cp.to_json(), indent=2, sort_keys=True).encode() + b"\n"


@dataclass
class Found:
    """Checkpoints read from a place, and files there that are not readable checkpoints."""

    checkpoints: list[tuple[str, Checkpoint]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def add(self, name: str, data: bytes) -> None:
        if len(data) > MAX_CHECKPOINT_BYTES:
            self.problems.append(f"{name}: larger than any checkpoint")
            return
        try:
            self.checkpoints.append((name, Checkpoint.from_json(json.loads(data))))
        except (ValueError, RecursionError) as exc:
            self.problems.append(f"{name}: {exc}")


# -- a directory --------------------------------------------------------------------------
def _write_dir(root: Path, checkpoints: Iterable[Checkpoint]) -> int:
    written = 0
    for cp in checkpoints:
        path = root / object_name(cp)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # Never through a symlink, never over a checkpoint already kept.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as out:
            out.write(_encoded(cp))
            out.flush()
            os.fsync(out.fileno())
        written += 1
    return written


def _read_dir(root: Path) -> Found:
    if not root.is_dir():
        raise CheckpointPlaceError(f"checkpoints: {root} is not a directory")
    found = Found()
    for path in sorted(root.glob("*/*.json")):
        try:
            found.add(str(path), read_regular_file(path, MAX_CHECKPOINT_BYTES))
        except OSError as exc:  # FileRefusedError (a FIFO, a device, too large) among them
            found.problems.append(f"{path}: cannot be read ({exc.strerror or exc})")
    return found


# -- an S3 bucket -------------------------------------------------------------------------
def _split_s3(place: str) -> tuple[str, str]:
    bucket, _, prefix = place.removeprefix("s3://").partition("/")
    if not bucket:
        raise CheckpointPlaceError(f"checkpoints: {place} names no bucket")
    return bucket, prefix.strip("/") + "/" if prefix.strip("/") else ""


def _s3_client() -> Any:
    import boto3  # only for a bucket: the SDK is slow to import

    # The SDK's own configuration (AWS_PROFILE, AWS_REGION, AWS_ENDPOINT_URL, a role).
    return boto3.client("s3")


def _object_lock(client: Any, bucket: str) -> dict[str, Any] | None:
    """The bucket's Object Lock configuration when it has Object Lock, else None."""
    from botocore.exceptions import ClientError

    try:
        config = client.get_object_lock_configuration(Bucket=bucket)["ObjectLockConfiguration"]
    except ClientError:
        return None  # not enabled (or not ours to see): plain objects
    return config if config.get("ObjectLockEnabled") == "Enabled" else None


def _write_s3(place: str, checkpoints: Iterable[Checkpoint]) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = _split_s3(place)
    try:
        client = _s3_client()
        lock = _object_lock(client, bucket)
        have = set(_list_s3(client, bucket, prefix))
        written = 0
        for cp in checkpoints:
            key = prefix + object_name(cp)
            if key in have:
                continue
            extra: dict[str, Any] = {}
            if lock is not None and not lock.get("Rule"):  # else the bucket's rule applies
                until = dt.datetime.now(dt.UTC) + dt.timedelta(days=RETAIN_DAYS)
                extra = {"ObjectLockMode": "COMPLIANCE", "ObjectLockRetainUntilDate": until}
            client.put_object(
                Bucket=bucket, Key=key, Body=_encoded(cp), ContentType="application/json",
                ChecksumAlgorithm="SHA256", **extra,
            )  # fmt: skip
            written += 1
        return written
    except (BotoCoreError, ClientError) as exc:
        raise CheckpointPlaceError(f"checkpoints: cannot write to {place}: {exc}") from None


def _list_s3(client: Any, bucket: str, prefix: str) -> list[str]:
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", []) if o["Key"].endswith(".json")]
    return keys


def _read_s3(place: str) -> Found:
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = _split_s3(place)
    found = Found()
    try:
        client = _s3_client()
        for key in sorted(_list_s3(client, bucket, prefix)):
            body = client.get_object(Bucket=bucket, Key=key)["Body"]
            found.add(f"s3://{bucket}/{key}", body.read(MAX_CHECKPOINT_BYTES + 1))
    except (BotoCoreError, ClientError) as exc:
        raise CheckpointPlaceError(f"checkpoints: cannot read {place}: {exc}") from None
    return found


# -- in an evidence pack -------------------------------------------------------------------
PACK_NAME = "checkpoint.json"


def pack_checkpoint(store: HistoryStore, plan: str) -> bytes:
    """The plan's newest checkpoint, for a pack (``null`` when the store has none yet)."""
    newest = newest_checkpoint(store, plan)
    return json.dumps(newest.to_json() if newest else None, indent=2).encode() + b"\n"


def pack_problems(files: dict[str, bytes], verifier: Verifier | None) -> list[str]:
    """A pack's checkpoint against its chain links: it must cover every link, with the head
    it names at its length, and, signed, be signed by the key given."""
    if PACK_NAME not in files:
        return []  # a pack made before checkpoints: the statement says which files it has
    try:
        data = json.loads(files[PACK_NAME])
        if data is None:
            return []
        cp = Checkpoint.from_json(data)
        links = json.loads(files.get("chain.json", b"[]"))
        seqs = {int(link["seq"]): str(link["entry_sha256"]) for link in links
                if link.get("plan") == cp.plan}  # fmt: skip
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        return [f"{PACK_NAME}: not a checkpoint ({exc})"]
    problems = []
    beyond = [seq for seq in seqs if seq > cp.length]
    if beyond:
        problems.append(f"{PACK_NAME}: covers {cp.length} links, the run's reach {max(beyond)}")
    if cp.length in seqs and seqs[cp.length] != cp.head_sha256:
        problems.append(f"{PACK_NAME}: its head differs from the run's link {cp.length}")
    if verifier is not None and cp.signature is not None:
        problem = signature_problem(cp, verifier)
        if problem:
            problems.append(f"{PACK_NAME}: {problem}")
    return problems


# -- either -------------------------------------------------------------------------------
def write_checkpoints(place: str, checkpoints: Iterable[Checkpoint]) -> int:
    """Keep ``checkpoints`` at ``place`` (a directory, or s3://bucket/prefix); those already
    there are left as they are. Returns how many were written."""
    if place.startswith("s3://"):
        return _write_s3(place, checkpoints)
    try:
        return _write_dir(Path(place), checkpoints)
    except OSError as exc:
        raise CheckpointPlaceError(f"checkpoints: cannot write to {place}: {exc}") from None


def read_checkpoints(place: str) -> Found:
    """Every checkpoint kept at ``place``; one that cannot be read is a problem, not skipped."""
    return _read_s3(place) if place.startswith("s3://") else _read_dir(Path(place))


__all__ = [
    "CheckpointPlaceError",
    "Found",
    "configured_sign",
    "export_if_due",
    "object_name",
    "pack_checkpoint",
    "pack_problems",
    "read_checkpoints",
    "signature_problem",
    "signed_history",
    "write_checkpoints",
]
