"""Azure Blob Storage of one site, through the official ``azure-storage-blob`` SDK.

A plan's bucket is a container here. The readiness checks call the same methods as on S3
(:class:`~drills.targets.provider_api.ObjectStoreAdapter`); what Azure calls otherwise:

- An Azure ETag names a write, not the content: two accounts holding the same bytes have
  two ETags. A listing gives the blob's Content-MD5 instead (hex, like a simple S3 ETag),
  which object replication and AzCopy copy along; a blob without one gets its ETag with
  :data:`NO_MD5` after it, which never equals another copy's, so the comparison counts the
  pair as unverified rather than matching or differing.
- "Add only" rests on blob versioning or blob soft delete, both account settings. The data
  plane shows soft delete (the Blob service properties) and versions (a listing's version
  ids); :meth:`AzureBlobStore.versioning` is ``Enabled`` when either protects the
  container. Lifecycle management policies are on the management plane, out of reach of a
  storage key: the soft-delete retention is the only rule reported.

Credentials come from the provider's settings by reference only (see
:mod:`drills.targets.objects.azure_settings`); they never reach a log, an error or a repr.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.storage.blob import BlobServiceClient, ContainerClient

from drills.errors import MisroutedError, PermanentError, TargetError, TemporaryError
from drills.targets.objects.listing import (
    BufferGauge,
    Listing,
    ListingLimits,
    OrderedListing,
    Page,
)
from drills.targets.objects.store import (
    KeyHistory,
    LifecycleRule,
    ObjectInfo,
    VersionInfo,
    by_key,
    newest_of,
)
from drills.targets.retry import DEFAULT_POLICY, RetryPolicy, retry_call

log = logging.getLogger("drills.targets.objects")

NO_MD5 = "-no-md5"
# Azure answers at most 5,000 blobs a page.
PAGE_SIZE = 5000
SOFT_DELETE_RULE = "blob soft delete"
# Error codes of a store that answered with its own refusal: judged, never retried.
_REFUSALS = {
    "AuthenticationFailed": "the account key or SAS was refused (AuthenticationFailed)",
    "AuthorizationFailure": "the credentials may not do this (AuthorizationFailure)",
    "AuthorizationPermissionMismatch": "the credentials may not do this "
    "(AuthorizationPermissionMismatch)",
    "InvalidAuthenticationInfo": "the credentials are malformed (InvalidAuthenticationInfo)",
}


def _aware(moment: dt.datetime) -> dt.datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def _etag(blob: Any) -> str:
    md5 = getattr(blob.content_settings, "content_md5", None)
    if md5:
        return bytes(md5).hex()
    return str(blob.etag).strip('"') + NO_MD5


def _info(blob: Any) -> ObjectInfo:
    return ObjectInfo(blob.name, int(blob.size or 0), _etag(blob), _aware(blob.last_modified))


class AzureBlobStore:
    """One site's Azure Blob Storage account: reads, and the canary of ``data.dr_writable``."""

    def __init__(
        self,
        service: BlobServiceClient,
        role: str = "",
        *,
        limits: ListingLimits | None = None,
        retry: RetryPolicy = DEFAULT_POLICY,
    ) -> None:
        self.role = role or "?"
        self.retry = retry
        self.limits = limits or ListingLimits(page_size=PAGE_SIZE)
        self._service = service
        # The account URL holds no key; a SAS in its query is cut off.
        self.target = f"azure-blob {role} ({service.url.split('?')[0].rstrip('/')})".replace(
            "  ", " "
        )

    def describe(self) -> str:
        return self.target

    def __repr__(self) -> str:
        return f"AzureBlobStore({self.target!r})"

    def close(self) -> None:
        self._service.close()

    def _container(self, bucket: str) -> ContainerClient:
        return self._service.get_container_client(bucket)

    # -- listings -----------------------------------------------------------------------

    def objects(
        self, bucket: str, prefix: str = "", *, gauge: BufferGauge | None = None
    ) -> Listing[ObjectInfo]:
        """Every blob under ``prefix``, in name order, fetched ahead in a thread."""
        return self._listing(bucket, prefix, versions=False, gauge=gauge)

    def newest(self, bucket: str, prefix: str = "") -> ObjectInfo | None:
        """The blob under ``prefix`` with the latest Last-Modified, or None when empty."""
        return newest_of(self.objects(bucket, prefix))

    def versions(self, bucket: str, prefix: str = "") -> Listing[VersionInfo]:
        """Every version and soft-deleted blob under ``prefix``, by name.

        Azure has no delete markers: a deleted blob is a soft-deleted one, or a name whose
        versions are all previous ones. ``delete_marker`` is True for a soft-deleted entry.
        """
        return self._listing(bucket, prefix, versions=True)

    def _listing(
        self, bucket: str, prefix: str, *, versions: bool, gauge: BufferGauge | None = None
    ) -> Listing[Any]:
        def fetch(at: str, _delimited: bool, token: object) -> Page[Any]:
            return self._page(bucket, at, token, versions=versions)

        # Flat, not sharded by "directory": Azure pages hold 5,000 blobs and one account
        # answers them fast; the walk would cost a request per directory.
        listing = OrderedListing(
            fetch,
            prefix,
            limits=self.limits,
            shard=False,
            gauge=gauge,
            name=f"azure{'v' if versions else ''}-{self.role}",
            target=f"{self.target} container {bucket}",
            unique_keys=not versions,  # one name's versions may span two pages
        )
        return listing.start()

    def key_histories(self, bucket: str, prefix: str = "") -> Iterator[KeyHistory]:
        """Each name under ``prefix`` once: deleted when it has no live current version;
        every version and soft-deleted copy holds data."""
        for group in by_key(self.versions(bucket, prefix)):
            live = any(v.is_latest and not v.delete_marker for v in group)
            modified = max(v.last_modified for v in group)
            yield KeyHistory(group[0].key, not live, len(group), modified)

    # -- configuration and single blobs --------------------------------------------------

    def soft_delete_days(self) -> int | None:
        """The account's blob soft-delete retention in days; None when it is off."""
        props = self._call("", self._service.get_service_properties)
        policy = props.get("delete_retention_policy")
        if policy is None or not policy.enabled:
            return None
        return int(policy.days or 0)

    def versioning(self, bucket: str) -> str:
        """``Enabled`` when blob soft delete is on or the container's blobs carry version
        ids (versioning is an account setting the data plane shows only that way), else
        ``Disabled``. A missing container is an error, as on S3."""
        self._call(bucket, self._container(bucket).get_container_properties)
        if self.soft_delete_days() is not None:
            return "Enabled"

        def first_page() -> list[Any]:
            pages = self._container(bucket).list_blobs(include=["versions"], results_per_page=1)
            return list(next(pages.by_page(), []))

        found = self._call(bucket, first_page)
        return "Enabled" if any(b.version_id for b in found) else "Disabled"

    def lifecycle_rules(self, bucket: str) -> tuple[LifecycleRule, ...]:
        """The soft-delete retention as a rule that expires deleted data after its days.

        Lifecycle management policies cannot be read with a storage key: not reported."""
        days = self.soft_delete_days()
        if days is None:
            return ()
        return (
            LifecycleRule(
                id=SOFT_DELETE_RULE,
                enabled=True,
                prefix="",
                narrowed=False,
                expires_current=False,
                noncurrent_days=days,
                newer_noncurrent_versions=None,
            ),
        )

    def checksums(self, bucket: str, key: str) -> dict[str, str]:
        """None of S3's checksum fields: Content-MD5 is already in the listing's ETag."""
        self._call(bucket, self._container(bucket).get_blob_client(key).get_blob_properties)
        return {}

    def subdirectories(self, bucket: str, prefix: str) -> list[str]:
        """The virtual directories directly under ``prefix`` (delimiter ``/``), in order."""

        def walk() -> list[str]:
            items = self._container(bucket).walk_blobs(name_starts_with=prefix, delimiter="/")
            return [item.name for item in items if item.name.endswith("/")]

        found: list[str] = self._call(bucket, walk)
        return sorted(found)

    def read(self, bucket: str, key: str, *, limit: int) -> bytes:
        """A small blob's bytes; one larger than ``limit`` is refused, not read."""
        blob = self._container(bucket).get_blob_client(key)
        props = self._call(bucket, blob.get_blob_properties)
        if int(props.size) > limit:
            raise PermanentError(
                self.target, f"blob {bucket}/{key} is larger than {limit} bytes: not read"
            )
        data: bytes = self._call(bucket, lambda: bytes(blob.download_blob().readall()))
        return data

    def download(self, bucket: str, key: str, path: str) -> str:
        """A blob into a local file, in chunks; returns the MD5 (hex) of what was written."""

        def fetch() -> str:
            digest = hashlib.md5()
            with open(path, "wb") as out:
                for chunk in self._container(bucket).download_blob(key).chunks():
                    digest.update(chunk)
                    out.write(chunk)
            return digest.hexdigest()

        md5: str = self._call(bucket, fetch)
        return md5

    # -- the one write: a canary that proves DR accepts writes ----------------------------

    def put_canary(self, bucket: str, key: str, body: bytes) -> str | None:
        """Write ``body`` as a new blob; its version id when the account keeps versions."""

        def put() -> dict[str, Any]:
            blob = self._container(bucket).get_blob_client(key)
            return dict(blob.upload_blob(body, overwrite=False))

        reply = self._once(bucket, put)
        version = reply.get("version_id")
        return str(version) if version else None

    def remove_canary(self, bucket: str, key: str, version_id: str | None) -> None:
        """Delete the canary, and then its version when the account keeps versions, so no
        previous version is left behind. Soft delete, if on, still keeps it for its days."""
        blob = self._container(bucket).get_blob_client(key)
        self._once(bucket, blob.delete_blob)
        if version_id:
            self._once(bucket, lambda: blob.delete_blob(version_id=version_id))

    # -- one request each ---------------------------------------------------------------

    def _page(self, bucket: str, prefix: str, token: object, *, versions: bool) -> Page[Any]:
        def fetch() -> tuple[list[Any], str | None]:
            include = ["versions", "deleted"] if versions else None
            pages = (
                self._container(bucket)
                .list_blobs(
                    name_starts_with=prefix or None,
                    include=include,
                    results_per_page=self.limits.page_size,
                )
                .by_page(continuation_token=str(token) if token else None)
            )
            page = list(next(pages, []))
            return page, getattr(pages, "continuation_token", None)

        blobs, next_token = self._call(bucket, fetch)
        if not versions:
            return Page([_info(b) for b in blobs if not b.deleted], (), next_token or None)
        # Azurite and an account without versioning give no version id: the blob is current.
        entries = [
            VersionInfo(
                b.name,
                b.version_id or "null",
                bool(b.is_current_version) or (b.version_id is None and not b.deleted),
                bool(b.deleted),
                _aware(b.deleted_time or b.last_modified) if b.deleted else _aware(b.last_modified),
            )
            for b in blobs
        ]
        return Page(entries, (), next_token or None)

    def _once(self, bucket: str, fn: Callable[[], Any]) -> Any:
        """One request, translated, not retried (a write)."""
        try:
            return fn()
        except AzureError as exc:
            raise self._translate(bucket, exc) from exc

    def _call(self, bucket: str, fn: Callable[[], Any]) -> Any:
        """One read, translated, and retried when the failure is temporary."""
        return retry_call(lambda: self._once(bucket, fn), policy=self.retry)

    def _translate(self, bucket: str, exc: AzureError) -> TargetError:
        code = getattr(exc, "error_code", None) or ""
        code = str(getattr(code, "value", code))  # the SDK's StorageErrorCode, or a str
        where = f"the {self.role} site" if self.role != "?" else "this site"
        if isinstance(exc, ResourceNotFoundError) and code in ("ContainerNotFound", ""):
            if code == "" and bucket:
                return MisroutedError(self.target, f"HTTP 404 {_NOT_AZURE}")
            return PermanentError(self.target, f"container {bucket!r} does not exist at {where}")
        if code in _REFUSALS:
            return PermanentError(self.target, _REFUSALS[code])
        if isinstance(exc, ServiceRequestError | ServiceResponseError):
            return TemporaryError(self.target, f"cannot reach the account ({_short(exc)})", 0.0)
        if isinstance(exc, ClientAuthenticationError):
            return PermanentError(self.target, f"authentication refused ({code or 'no code'})")
        if isinstance(exc, ResourceExistsError):
            return PermanentError(self.target, f"already exists ({code})")
        if isinstance(exc, HttpResponseError):
            status = int(exc.status_code or 0)
            if not code and status < 500:
                return MisroutedError(self.target, f"HTTP {status} {_NOT_AZURE}")
            cause = f"{code or status}: {_short(exc)}"
            if status >= 500 or code in ("ServerBusy", "OperationTimedOut", "InternalError"):
                return TemporaryError(self.target, cause, 0.0)
            return PermanentError(self.target, cause)
        return TemporaryError(self.target, f"{type(exc).__name__}: {_short(exc)}", 0.0)


_NOT_AZURE = (
    "without an Azure error: not the Blob service asked (a wrong account_url, or a proxy's?)"
)


def _short(exc: Exception) -> str:
    """The first line of an SDK error: the rest is a request dump with headers."""
    text = str(getattr(exc, "message", None) or exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
