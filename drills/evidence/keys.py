"""The Ed25519 key pair that signs evidence packs.

The private key is a credential like any other: ``DRILLS_SIGNING_KEY`` holds a reference
(``file:PATH``, ``env:NAME`` or ``prefect:BLOCK``) to its PEM text, resolved only when a
pack is signed. It is never stored, logged or shown; a pack names only the key id, the
SHA-256 of the raw 32-byte public key.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from drills.errors import DrillError, PermanentError
from drills.plan.files import FileRefusedError, read_regular_file
from drills.plan.refs import SecretRef, resolve_secret

SIGNING_KEY_ENV = "DRILLS_SIGNING_KEY"
PRIVATE_NAME = "signing.key"
PUBLIC_NAME = "signing.pub"
# An Ed25519 public key in PEM is 113 bytes; a key file far larger is not one.
MAX_PUBLIC_KEY_BYTES = 64 * 1024


class SigningKeyError(DrillError):
    """A key that cannot be read or used; the message never holds key material."""


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


@dataclass(frozen=True)
class Signer:
    keyid: str
    _private: Ed25519PrivateKey = field(repr=False)

    def sign(self, message: bytes) -> bytes:
        return self._private.sign(message)


@dataclass(frozen=True)
class Verifier:
    keyid: str
    public: Ed25519PublicKey = field(repr=False)

    def verify(self, signature: bytes, message: bytes) -> bool:
        try:
            self.public.verify(signature, message)
        except InvalidSignature:
            return False
        return True


def _create(path: Path, data: bytes, mode: int) -> None:
    # O_EXCL|O_NOFOLLOW: never through a link planted where the file goes (a dangling one
    # would otherwise write the key wherever it points), never over an existing file.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def keygen(directory: Path, *, overwrite: bool = False) -> tuple[Path, Path, str]:
    """Write ``signing.key`` (PKCS#8 PEM, mode 0600) and ``signing.pub`` (PEM) in
    ``directory``; return their paths and the key id. An existing key is kept unless
    ``overwrite``: replacing it would orphan every pack it signed. Anything at either
    name, a symbolic link included (dangling or not), counts as existing."""
    directory.mkdir(parents=True, exist_ok=True)
    private_path, public_path = directory / PRIVATE_NAME, directory / PUBLIC_NAME
    there = [p for p in (private_path, public_path) if os.path.lexists(p)]
    if there and not overwrite:
        verb = "exists" if len(there) == 1 else "exist"
        raise FileExistsError(f"{' and '.join(map(str, there))} already {verb}")
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = private.public_key()
    public_pem = public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    for path in there:  # --force: the names themselves go (a link, not what it points at)
        path.unlink()
    # Created 0600 from the start: the key is never readable by others, not even briefly.
    _create(private_path, pem, 0o600)
    try:
        _create(public_path, public_pem, 0o644)
    except BaseException:
        private_path.unlink()  # ours, just made: no half pair left behind
        raise
    return private_path, public_path, key_id(public)


def configured_reference() -> SecretRef | None:
    """The reference in ``DRILLS_SIGNING_KEY``, or None when no key is configured."""
    text = os.environ.get(SIGNING_KEY_ENV, "").strip()
    if not text:
        return None
    try:
        return SecretRef.parse(text)
    except ValueError as exc:
        raise SigningKeyError(f"{SIGNING_KEY_ENV}: {exc}") from None


def load_signer(ref: SecretRef | None, base_dir: Path | None = None) -> Signer | None:
    """The signer ``ref`` names (None: unsigned packs). Errors name the reference only."""
    if ref is None:
        return None
    try:
        text = resolve_secret(ref, base_dir or Path.cwd())
    except PermanentError as exc:
        raise SigningKeyError(str(exc)) from None
    try:
        private = serialization.load_pem_private_key(text.encode("utf-8"), password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise SigningKeyError(
            f"signing key {ref} is not an unencrypted PEM private key "
            "(make one with `drills evidence keygen DIR`)"
        ) from None
    if not isinstance(private, Ed25519PrivateKey):
        raise SigningKeyError(f"signing key {ref} is not an Ed25519 key")
    return Signer(key_id(private.public_key()), private)


def load_verifier(path: Path) -> Verifier:
    """The public key in ``path`` (PEM, as keygen writes it): a small regular file only, so
    a FIFO or a device given as the key is refused instead of read forever."""
    try:
        data = read_regular_file(path, MAX_PUBLIC_KEY_BYTES)
    except FileRefusedError as exc:
        raise SigningKeyError(f"public key {path} {exc.reason}") from None
    except OSError as exc:
        raise SigningKeyError(f"cannot read public key {path}: {exc.strerror}") from None
    try:
        public = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise SigningKeyError(f"{path} is not a PEM public key") from None
    if not isinstance(public, Ed25519PublicKey):
        raise SigningKeyError(f"{path} is not an Ed25519 public key")
    return Verifier(key_id(public), public)
