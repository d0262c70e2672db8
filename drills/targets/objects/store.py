"""S3-compatible object storage of one site, read-only, through boto3.

Listings are the hot path: a bucket may hold millions of objects, so they are
generators in key order (see :mod:`drills.targets.objects.listing`) and never
lists. Every botocore error is translated here, once, into a
:class:`~drills.errors.TargetError` naming the site's storage and the bucket.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import DEFAULT_TIMESTAMP_PARSER, ResponseParserError

from drills.errors import PermanentError
from drills.plan import DrillPlan, Site
from drills.targets import aws
from drills.targets.aws import AwsEndpoint
from drills.targets.objects.listing import (
    BufferGauge,
    Listing,
    ListingLimits,
    OrderedListing,
    Page,
)
from drills.targets.retry import DEFAULT_POLICY, RetryPolicy, retry_call

log = logging.getLogger("drills.targets.objects")

CHECKSUM_FIELDS = (
    "ChecksumCRC64NVME",
    "ChecksumCRC32",
    "ChecksumCRC32C",
    "ChecksumSHA1",
    "ChecksumSHA256",
)


class ObjectInfo(NamedTuple):
    """The current version of one object, as a listing shows it."""

    key: str
    size: int
    etag: str  # without the quotes S3 puts around it
    last_modified: dt.datetime  # aware

    @property
    def multipart_etag(self) -> bool:
        """An ETag of a multipart upload (``md5-of-md5s-N``) depends on the part sizes."""
        return "-" in self.etag


class VersionInfo(NamedTuple):
    """One version of an object, or a delete marker."""

    key: str
    version_id: str
    is_latest: bool
    delete_marker: bool
    last_modified: dt.datetime


class KeyHistory(NamedTuple):
    """What the versions of one key add up to."""

    key: str
    deleted: bool  # the latest version is a delete marker
    object_versions: int  # versions holding data (delete markers not counted)
    latest_modified: dt.datetime


@dataclass(frozen=True)
class LifecycleRule:
    """The parts of one lifecycle rule that can remove data."""

    id: str
    enabled: bool
    prefix: str  # "" for the whole bucket
    narrowed: bool  # also filtered by tags or object size: applies to some objects only
    expires_current: bool  # an Expiration by Days or Date: current versions are removed
    noncurrent_days: int | None  # NoncurrentVersionExpiration.NoncurrentDays
    newer_noncurrent_versions: int | None  # ...kept whatever their age

    def covers(self, prefix: str) -> bool:
        """Whether the rule can act on some object under ``prefix``."""
        return self.enabled and (self.prefix.startswith(prefix) or prefix.startswith(self.prefix))

    @classmethod
    def from_api(cls, rule: dict[str, Any]) -> LifecycleRule:
        flt = rule.get("Filter") or {}
        both = flt.get("And") or {}
        prefix = rule.get("Prefix", flt.get("Prefix", both.get("Prefix", ""))) or ""
        narrowed = any(
            name in part
            for part in (flt, both)
            for name in ("Tag", "Tags", "ObjectSizeGreaterThan", "ObjectSizeLessThan")
        )
        expiration = rule.get("Expiration") or {}
        noncurrent = rule.get("NoncurrentVersionExpiration") or {}
        return cls(
            id=str(rule.get("ID", "")),
            enabled=rule.get("Status") == "Enabled",
            prefix=prefix,
            narrowed=narrowed,
            expires_current="Days" in expiration or "Date" in expiration,
            noncurrent_days=noncurrent.get("NoncurrentDays") if noncurrent else None,
            newer_noncurrent_versions=noncurrent.get("NewerNoncurrentVersions"),
        )


def newest_of(listing: Iterator[ObjectInfo]) -> ObjectInfo | None:
    """The entry with the latest last-modified time, or None for an empty listing."""
    newest: ObjectInfo | None = None
    for info in listing:
        if newest is None or info.last_modified > newest.last_modified:
            newest = info
    return newest


def by_key(versions: Listing[VersionInfo]) -> Iterator[list[VersionInfo]]:
    """The versions of each key together, in key order; the listing is closed however the
    caller stops."""
    group: list[VersionInfo] = []
    try:
        for version in versions:
            if group and version.key != group[0].key:
                yield group
                group = []
            group.append(version)
    finally:
        versions.close()
    if group:
        yield group


def _parse_timestamp(value: Any) -> dt.datetime:
    """An ISO 8601 timestamp of a listing, parsed without dateutil's cost."""
    try:
        parsed = dt.datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return DEFAULT_TIMESTAMP_PARSER(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _fast_timestamps(s3: Any) -> None:
    """Let this client parse timestamps with ``datetime.fromisoformat``.

    botocore's default parser goes through dateutil, which is three quarters of
    the CPU spent on a 1,000-key listing page. The parser factory belongs to the
    client's own session (``aws.client`` makes one per client), so nothing else
    changes. Should botocore move it, listings stay correct, only slower.
    """
    factory = getattr(getattr(s3, "_endpoint", None), "_response_parser_factory", None)
    if factory is not None and hasattr(factory, "set_parser_defaults"):
        factory.set_parser_defaults(timestamp_parser=_parse_timestamp)
    else:
        log.debug("botocore has no parser factory on the endpoint; default timestamps")


def endpoint_for(role: str, site: Site, plan: DrillPlan) -> AwsEndpoint:
    """The site's object storage endpoint, region and resolved credentials.

    Without credentials of its own, object storage uses the site's AWS ones (the
    same fallback the region has), and then boto3's default chain.
    """
    storage = site.objects
    creds = storage.credentials or (site.aws.credentials if site.aws else None)
    return aws.resolve_endpoint(plan, site.objects_region, storage.endpoint_url, creds)


class ObjectStore:
    """One site's object storage: reads, and the one canary write of ``data.dr_writable``."""

    def __init__(
        self,
        where: AwsEndpoint,
        role: str = "",
        *,
        read_timeout: float = aws.READ_TIMEOUT_S,
        limits: ListingLimits | None = None,
        retry: RetryPolicy = DEFAULT_POLICY,
    ) -> None:
        self.role = role or "?"
        self.retry = retry
        self.target = where.describe(f"s3 {role}".strip())
        self.limits = limits or ListingLimits()
        # Several listings of one run share this client, each with its shard workers.
        pool = 4 * self.limits.shards_ahead + 4
        self._client = aws.client("s3", where, read_timeout=read_timeout, max_pool=pool)
        _fast_timestamps(self._client)

    @classmethod
    def for_site(
        cls,
        role: str,
        site: Site,
        plan: DrillPlan,
        *,
        read_timeout: float = aws.READ_TIMEOUT_S,
        limits: ListingLimits | None = None,
    ) -> ObjectStore:
        return cls(endpoint_for(role, site, plan), role, read_timeout=read_timeout, limits=limits)

    def describe(self) -> str:
        return self.target

    def __repr__(self) -> str:
        return f"ObjectStore({self.target!r})"

    def close(self) -> None:
        self._client.close()

    # -- listings -----------------------------------------------------------------------

    def objects(
        self, bucket: str, prefix: str = "", *, gauge: BufferGauge | None = None
    ) -> Listing[ObjectInfo]:
        """Every current object under ``prefix``, in key order, listed by shards at once.

        Fetching starts at once, in background threads; memory is bounded by
        ``self.limits.buffer_bound`` entries, and ``gauge``, when given, records how
        many were held at most. ``close()`` the listing to abandon it early.
        """

        def fetch(at: str, delimited: bool, token: object) -> Page[ObjectInfo]:
            return self._objects_page(bucket, at, delimited, token)

        listing = OrderedListing(
            fetch,
            prefix,
            limits=self.limits,
            gauge=gauge,
            name=f"s3-{self.role}",
            target=f"{self.target} bucket {bucket}",
        )
        return listing.start()

    def newest(self, bucket: str, prefix: str = "") -> ObjectInfo | None:
        """The object under ``prefix`` with the latest LastModified, or None when empty."""
        return newest_of(self.objects(bucket, prefix))

    def versions(self, bucket: str, prefix: str = "") -> Listing[VersionInfo]:
        """Every version and delete marker under ``prefix``: by key, the latest first."""

        def fetch(at: str, _delimited: bool, token: object) -> Page[VersionInfo]:
            return self._versions_page(bucket, at, token)

        # Flat: delimiter pagination of versions is where S3 look-alikes differ most.
        listing = OrderedListing(
            fetch,
            prefix,
            limits=self.limits,
            shard=False,
            name=f"s3v-{self.role}",
            unique_keys=False,
            target=f"{self.target} bucket {bucket}",
        )
        return listing.start()

    def key_histories(self, bucket: str, prefix: str = "") -> Iterator[KeyHistory]:
        """Each key under ``prefix`` once, in key order: deleted or not, versions held."""
        for group in by_key(self.versions(bucket, prefix)):
            latest = next((v for v in group if v.is_latest), group[0])
            deleted = latest.is_latest and latest.delete_marker
            count = sum(not v.delete_marker for v in group)
            yield KeyHistory(group[0].key, deleted, count, latest.last_modified)

    # -- configuration and single objects ------------------------------------------------

    def versioning(self, bucket: str) -> str:
        """``Enabled``, ``Suspended``, or ``Disabled`` when versioning was never turned on."""
        reply = self._call(bucket, self._client.get_bucket_versioning, Bucket=bucket)
        return str(reply.get("Status") or "Disabled")

    def lifecycle_rules(self, bucket: str) -> tuple[LifecycleRule, ...]:
        """The bucket's lifecycle rules; none when it has no lifecycle configuration."""
        try:
            reply = self._call(
                bucket, self._client.get_bucket_lifecycle_configuration, Bucket=bucket
            )
        except PermanentError as exc:
            cause = exc.__cause__
            if (
                isinstance(cause, ClientError)
                and aws.error_code(cause) == "NoSuchLifecycleConfiguration"
            ):
                return ()
            raise
        return tuple(LifecycleRule.from_api(rule) for rule in reply.get("Rules", ()))

    def checksums(self, bucket: str, key: str) -> dict[str, str]:
        """The object's stored checksums by field name (``ChecksumSHA256``...), maybe none.

        ``ChecksumType`` is included when the store reports it: a ``COMPOSITE``
        checksum, like a multipart ETag, depends on the part sizes.
        """
        reply = self._call(
            bucket, self._client.head_object, Bucket=bucket, Key=key, ChecksumMode="ENABLED"
        )
        found = {name: str(reply[name]) for name in CHECKSUM_FIELDS if reply.get(name)}
        if found and reply.get("ChecksumType"):
            found["ChecksumType"] = str(reply["ChecksumType"])
        return found

    def subdirectories(self, bucket: str, prefix: str) -> list[str]:
        """The common prefixes directly under ``prefix`` (``Delimiter="/"``), in key order."""
        found: list[str] = []
        token: object = None
        while True:
            page = self._objects_page(bucket, prefix, True, token)
            found.extend(page.prefixes)
            if page.token is None:
                return found
            token = page.token

    def read(self, bucket: str, key: str, *, limit: int) -> bytes:
        """A small object's bytes; one larger than ``limit`` is refused, not read."""
        reply = self._call(bucket, self._client.get_object, Bucket=bucket, Key=key)
        body = reply["Body"]
        try:
            data: bytes = body.read(limit + 1)
        finally:
            body.close()
        if len(data) > limit:
            raise PermanentError(
                self.target, f"s3://{bucket}/{key} is larger than {limit} bytes: not read"
            )
        return data

    def download(self, bucket: str, key: str, path: str) -> str:
        """An object into a local file, streamed in 1 MiB blocks (memory stays flat
        whatever its size); returns the MD5 (hex) of what was written."""

        def fetch(**kwargs: Any) -> str:
            body = self._client.get_object(**kwargs)["Body"]
            digest = hashlib.md5()
            try:
                with open(path, "wb") as out:
                    for block in iter(lambda: body.read(1 << 20), b""):
                        digest.update(block)
                        out.write(block)
            finally:
                body.close()
            return digest.hexdigest()

        md5: str = self._call(bucket, fetch, Bucket=bucket, Key=key)
        return md5

    # -- the one write: a canary that proves DR accepts writes ----------------------------

    def put_canary(self, bucket: str, key: str, body: bytes) -> str | None:
        """Write ``body`` at ``key``; the version id when the bucket keeps versions."""
        reply = self._call(bucket, self._client.put_object, Bucket=bucket, Key=key, Body=body)
        return reply.get("VersionId")

    def remove_canary(self, bucket: str, key: str, version_id: str | None) -> None:
        """Delete the canary for good: its version when there is one, so no delete marker
        or non-current copy is left behind in a versioned bucket."""
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if version_id and version_id != "null":
            kwargs["VersionId"] = version_id
        self._call(bucket, self._client.delete_object, **kwargs)

    # -- one request each ---------------------------------------------------------------

    def _objects_page(
        self, bucket: str, prefix: str, delimited: bool, token: object
    ) -> Page[ObjectInfo]:
        kwargs: dict[str, Any] = {
            "Bucket": bucket,
            "Prefix": prefix,
            "MaxKeys": self.limits.page_size,
        }
        if delimited:
            kwargs["Delimiter"] = "/"
        if token is not None:
            kwargs["ContinuationToken"] = token
        reply = self._call(bucket, self._client.list_objects_v2, **kwargs)
        entries = [
            ObjectInfo(o["Key"], o["Size"], o["ETag"].strip('"'), o["LastModified"])
            for o in reply.get("Contents", ())
        ]
        prefixes = [p["Prefix"] for p in reply.get("CommonPrefixes", ())]
        more = reply.get("IsTruncated") and reply.get("NextContinuationToken")
        return Page(entries, prefixes, reply["NextContinuationToken"] if more else None)

    def _versions_page(self, bucket: str, prefix: str, token: object) -> Page[VersionInfo]:
        kwargs: dict[str, Any] = {
            "Bucket": bucket,
            "Prefix": prefix,
            "MaxKeys": self.limits.page_size,
        }
        if isinstance(token, tuple):
            kwargs["KeyMarker"], version_marker = token
            if version_marker:
                kwargs["VersionIdMarker"] = version_marker
        reply = self._call(bucket, self._client.list_object_versions, **kwargs)
        entries = [
            VersionInfo(
                v["Key"], v.get("VersionId", "null"), v["IsLatest"], False, v["LastModified"]
            )
            for v in reply.get("Versions", ())
        ] + [
            VersionInfo(
                m["Key"], m.get("VersionId", "null"), m["IsLatest"], True, m["LastModified"]
            )
            for m in reply.get("DeleteMarkers", ())
        ]
        # One page answers versions and delete markers apart; the stream wants them by key.
        entries.sort(key=lambda v: (v.key, not v.is_latest))
        more = reply.get("IsTruncated") and reply.get("NextKeyMarker")
        next_token = (
            (reply["NextKeyMarker"], reply.get("NextVersionIdMarker", "")) if more else None
        )
        return Page(entries, (), next_token)

    def _call(self, bucket: str, fn: Callable[..., Any], /, **kwargs: Any) -> Any:
        """One read request, translated, and retried when the failure is temporary."""

        def once() -> Any:
            try:
                return fn(**kwargs)
            except (ClientError, BotoCoreError, ResponseParserError) as exc:
                raise self._translate(bucket, exc) from exc

        return retry_call(once, policy=self.retry)

    def _translate(self, bucket: str, exc: Exception) -> Exception:
        if isinstance(exc, ClientError) and aws.error_code(exc) == "NoSuchBucket":
            where = f"the {self.role} site" if self.role != "?" else "this site"
            return PermanentError(self.target, f"bucket {bucket!r} does not exist at {where}")
        return aws.translate(self.target, exc)
