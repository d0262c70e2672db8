"""Container registries: what an image reference resolves to, at one site.

A drill needs one fact from a registry: the manifest digest a ``repository`` and a
tag (or digest) resolve to, or that they resolve to nothing. Two implementations
answer it: :class:`~drills.targets.registry.oci.OciDistribution` (the OCI
Distribution v2 API, for distribution, Harbor, Artifactory, Quay...) and
:class:`~drills.targets.registry.ecr.EcrImages` (Amazon ECR through boto3).
``registry_for`` (``from_plan.py``) picks one from the site's plan.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

# A digest reference (``sha256:<hex>``) as opposed to a tag.
_DIGEST = re.compile(r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-fA-F0-9]{32,}")

Ref = tuple[str, str]  # (repository, tag or digest)


class Registry(Protocol):
    """One site's registry; every method raises only ``TargetError`` subclasses."""

    target: str
    """The registry in an operator's words, for error messages: ``registry dr (http://…)``."""
    host: str
    """The host[:port] a client pulls from, as written in an image reference."""
    plain_http: bool
    """True when the registry speaks HTTP without TLS (tools then need telling)."""

    def digest(self, repository: str, reference: str) -> str | None:
        """The manifest digest of ``repository:reference``; None when it does not exist."""
        ...

    def digests(self, refs: Iterable[Ref], *, concurrency: int = 32) -> dict[Ref, str | None]:
        """:meth:`digest` for many references at once, over pooled connections."""
        ...

    def close(self) -> None: ...


def is_digest(reference: str) -> bool:
    return bool(_DIGEST.fullmatch(reference))


@dataclass(frozen=True)
class ImageName:
    """An image reference split into the parts a registry lookup needs.

    ``host`` is empty when the reference names none (Docker Hub's implicit default).
    """

    host: str
    repository: str
    tag: str | None
    digest: str | None

    @property
    def reference(self) -> str:
        """What to look up: the digest when pinned (that is what kubelet pulls), else the tag."""
        return self.digest or self.tag or "latest"

    @property
    def key(self) -> Ref:
        return (self.repository, self.reference)

    def __str__(self) -> str:
        """The reference without its registry host: the same at every site."""
        sep = "@" if self.digest else ":"
        return f"{self.repository}{sep}{self.reference}"


def parse_image(text: str) -> ImageName:
    """Split ``[host[:port]/]repository[:tag][@digest]`` the way container runtimes do.

    The first path component is a registry host only when it looks like one (it has a
    dot or a port, or is ``localhost``), so ``platform/session-store:7.2.4`` has none.
    """
    rest, _, digest = text.partition("@")
    host = ""
    first, slash, remainder = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        host, rest = first, remainder
    # A ':' after the last '/' starts the tag; one before it belongs to nothing else here.
    repository, colon, tag = rest.rpartition(":")
    if not colon or "/" in tag:
        repository, tag = rest, ""
    if not repository:
        raise ValueError(f"image reference {text!r} names no repository")
    return ImageName(host, repository, tag or None, digest or None)
