"""What a provider is: the four kinds of store drills talks to, each a Protocol, and the
record a package registers under the ``drills.providers`` entry-point group.

A plan names a provider for each store (``sites.*.objects.provider``,
``sites.*.registry.kind`` or ``.provider``, ``sites.*.secret_store.provider``,
``dns.provider``); :mod:`drills.targets.providers` finds the installed one by that name
and calls its ``build`` with a :class:`ProviderContext`. What ``build`` returns must
offer the methods of its kind's Protocol below: those are what the readiness checks
and the takeover call, nothing else. Every method raises only
:class:`drills.errors.TargetError` subclasses (``TemporaryError`` for what a retry may
cure, ``PermanentError`` for what it cannot), so a failure is reported, never a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from drills.targets.provider_context import ProviderContext as ProviderContext
from drills.targets.registry import Registry

if TYPE_CHECKING:
    from drills.targets.dns import ChangeResult, RecordAnswer
    from drills.targets.objects import KeyHistory, LifecycleRule, Listing, ObjectInfo, VersionInfo
    from drills.targets.retry import Waiting

Kind = Literal["objects", "dns", "registry", "secrets"]
KINDS: tuple[Kind, ...] = ("objects", "dns", "registry", "secrets")
GROUP = "drills.providers"


@runtime_checkable
class ObjectStoreAdapter(Protocol):
    """One site's object storage, holding the datasets' buckets (``s3``: S3 and compatibles)."""

    target: str
    """The store in an operator's words, for errors and evidence: ``s3 dr (http://…)``."""

    def describe(self) -> str: ...

    def objects(self, bucket: str, prefix: str = "") -> Listing[ObjectInfo]:
        """Every current object under ``prefix``, with size, etag and last-modified time."""
        ...

    def newest(self, bucket: str, prefix: str = "") -> ObjectInfo | None:
        """The most recently written object under ``prefix`` (the RPO's anchor)."""
        ...

    def versions(self, bucket: str, prefix: str = "") -> Listing[VersionInfo]: ...

    def key_histories(self, bucket: str, prefix: str = "") -> Iterator[KeyHistory]:
        """Each key's versions and delete markers, for the add-only rule."""
        ...

    def versioning(self, bucket: str) -> str:
        """``Enabled``, ``Suspended`` or ``""`` (never enabled)."""
        ...

    def lifecycle_rules(self, bucket: str) -> tuple[LifecycleRule, ...]: ...

    def checksums(self, bucket: str, key: str) -> dict[str, str]: ...

    def subdirectories(self, bucket: str, prefix: str) -> list[str]: ...

    def read(self, bucket: str, key: str, *, limit: int) -> bytes: ...

    def download(self, bucket: str, key: str, path: str) -> str: ...

    def put_canary(self, bucket: str, key: str, body: bytes) -> str | None:
        """Write a small object (the DR-writable canary); its version id, if versioned."""
        ...

    def remove_canary(self, bucket: str, key: str, version_id: str | None) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class DnsAdapter(Protocol):
    """The zone holding the plan's record. ``switch`` is :meth:`update`, ``confirm`` is
    :meth:`confirm` on every authoritative server, ``undo`` is :meth:`update` (or
    :meth:`delete`) back to the value read before the switch."""

    target: str
    poll_interval_s: float

    def read(self, name: str, rtype: str) -> list[RecordAnswer]:
        """The record as every authoritative server answers it, one answer per server."""
        ...

    def update(self, name: str, rtype: str, value: str, ttl: int) -> ChangeResult: ...

    def delete(self, name: str, rtype: str) -> None: ...

    def check_control(self, name: str, rtype: str) -> None:
        """Prove the credentials could change the record, without changing it."""
        ...

    def confirm(
        self,
        name: str,
        rtype: str,
        value: str,
        *,
        previous_serial: int | None = None,
        deadline_s: float = 60.0,
        on_wait: Callable[[Waiting], None] | None = None,
    ) -> list[RecordAnswer]:
        """Return once every authoritative server answers exactly ``value``; raise
        ``TemporaryError`` naming the stale servers at the deadline."""
        ...

    def close(self) -> None: ...


# A registry answers one question: which manifest digest an image resolves to.
RegistryAdapter = Registry


@runtime_checkable
class SecretStoreAdapter(Protocol):
    """One site's secret store, read-only. Values are read only to be fingerprinted:
    an adapter must never log them, put them in an error or in its ``repr``."""

    target: str

    def value(self, secret_id: str) -> bytes | None:
        """The current value (a JSON object is compared key by key), None when absent."""
        ...

    def describe(self, secret_id: str) -> Mapping[str, Any] | None:
        """Metadata without the value, None when absent. ``secrets.rotated`` reads
        ``LastRotatedDate`` and ``LastChangedDate`` (aware datetimes) when present."""
        ...

    def close(self) -> None: ...


PROTOCOLS: dict[Kind, type] = {
    "objects": ObjectStoreAdapter,
    "dns": DnsAdapter,
    "registry": Registry,
    "secrets": SecretStoreAdapter,
}


@dataclass(frozen=True)
class Provider:
    """What an entry point of the ``drills.providers`` group points at; its name is the
    entry point's name, which plans use to select it.

    ``switch``, ``confirm`` and ``undo`` say what a DNS provider does in a takeover;
    ``checks`` names the readiness checks that read through it.
    """

    kind: Kind
    build: Callable[[ProviderContext], Any]
    summary: str
    checks: tuple[str, ...] = ()
    switch: bool = False
    confirm: bool = False
    undo: bool = False

    @property
    def readiness(self) -> bool:
        return bool(self.checks)

    def supports(self) -> list[str]:
        flags = [("switch", self.switch), ("confirm", self.confirm), ("undo", self.undo)]
        return [word for word, on in flags if on] + (["readiness"] if self.readiness else [])


def missing_methods(kind: Kind, adapter: object) -> list[str]:
    """The methods of ``kind``'s Protocol that ``adapter`` lacks (empty when it conforms)."""
    protocol = PROTOCOLS[kind]
    wanted: Iterable[str] = [
        name
        for name in dir(protocol)
        if not name.startswith("_") and callable(getattr(protocol, name, None))
    ]
    return [name for name in wanted if not callable(getattr(adapter, name, None))]
