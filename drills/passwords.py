"""Operator password hashes: made by `drills ui hash-password`, checked by the dashboard.

Only the hash is ever configured (``DRILLS_UI_OPERATOR_PASSWORD_HASH``), never the
password. Two formats are accepted:

- ``scrypt$<salt>$<hash>`` (what ``hash_password`` makes; n=2**14, r=8, p=1);
- ``pbkdf2_sha256$<iterations>$<salt>$<hash>``,

with salt and hash in unpadded URL-safe base64.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
SCRYPT_LEN = 32
MIN_PBKDF2_ITERATIONS = 100_000


class PasswordHashError(ValueError):
    """A configured hash is malformed. The text never repeats the hash."""


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        raise PasswordHashError("the salt or hash is not base64") from None


def _scrypt(password: str, salt: bytes) -> bytes:
    return hashlib.scrypt(
        password.encode("utf-8"),
        salt=salt,
        n=SCRYPT_N,
        r=SCRYPT_R,
        p=SCRYPT_P,
        maxmem=64 * 1024 * 1024,
        dklen=SCRYPT_LEN,
    )


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """``scrypt$salt$hash`` of ``password`` with a fresh random salt."""
    if not password:
        raise ValueError("the password must not be empty")
    salt = salt if salt is not None else os.urandom(16)
    return f"scrypt${_b64(salt)}${_b64(_scrypt(password, salt))}"


def check_hash_format(encoded: str) -> None:
    """Raise PasswordHashError when ``encoded`` is not a hash this module can check."""
    _parse(encoded)


def _parse(encoded: str) -> tuple[str, int, bytes, bytes]:
    parts = encoded.strip().split("$")
    if parts[0] == "scrypt" and len(parts) == 3:
        return "scrypt", 0, _unb64(parts[1]), _unb64(parts[2])
    if parts[0] == "pbkdf2_sha256" and len(parts) == 4:
        try:
            iterations = int(parts[1])
        except ValueError:
            raise PasswordHashError("the pbkdf2 iteration count is not a number") from None
        if iterations < MIN_PBKDF2_ITERATIONS:
            raise PasswordHashError(f"pbkdf2 needs at least {MIN_PBKDF2_ITERATIONS} iterations")
        return "pbkdf2_sha256", iterations, _unb64(parts[2]), _unb64(parts[3])
    raise PasswordHashError(
        "expected scrypt$<salt>$<hash> or pbkdf2_sha256$<iterations>$<salt>$<hash>"
        " (make one with `drills ui hash-password`)"
    )


def verify_password(password: str, encoded: str) -> bool:
    """Whether ``password`` matches ``encoded``, compared in constant time."""
    scheme, iterations, salt, expected = _parse(encoded)
    if scheme == "scrypt":
        actual = _scrypt(password, salt)
    else:
        actual = hashlib.pbkdf2_hmac(
            "sha256", password.encode("utf-8"), salt, iterations, len(expected)
        )
    return hmac.compare_digest(actual, expected)
