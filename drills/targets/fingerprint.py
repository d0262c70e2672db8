"""Keyed fingerprints: compare secret values without ever holding them side by side.

A fingerprint is HMAC-SHA256 under a key drawn at random for each run, so a
fingerprint in a report cannot be matched against a guess offline, nor against
the fingerprint of the same value from another run.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping

DISPLAY_CHARS = 16  # enough to tell values apart by eye; a prefix of the full digest


def new_key() -> bytes:
    """A fresh fingerprint key for one run."""
    return secrets.token_bytes(32)


def fingerprint(key: bytes, value: bytes) -> str:
    """HMAC-SHA256 of ``value`` under ``key``, as 64 hex characters."""
    if not key:
        raise ValueError("a fingerprint needs a non-empty key")
    return hmac.new(key, value, hashlib.sha256).hexdigest()


def short(fp: str) -> str:
    """The display form of a fingerprint."""
    return fp[:DISPLAY_CHARS]


def fingerprints(key: bytes, fields: Mapping[str, bytes]) -> dict[str, str]:
    """One fingerprint per field name; the names are not secret, the values are."""
    return {name: fingerprint(key, value) for name, value in fields.items()}


def same(a: str, b: str) -> bool:
    """Constant-time equality of two fingerprints."""
    return hmac.compare_digest(a, b)
