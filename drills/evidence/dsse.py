"""DSSE envelopes around in-toto Statements: the supply-chain convention, so that standard
tools (in-toto, sigstore's, any DSSE verifier) read a pack's attestation as it is.

- DSSE v1 (github.com/secure-systems-lab/dsse): the signature is over
  ``PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body``, LEN being the
  byte length in ASCII decimal; the envelope is
  ``{"payload": b64(body), "payloadType": type, "signatures": [{"keyid", "sig": b64}]}``.
- in-toto Statement v1 (github.com/in-toto/attestation):
  ``{"_type", "subject": [{"name", "digest": {"sha256"}}], "predicateType", "predicate"}``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from drills.errors import DrillError
from drills.evidence.keys import Signer, Verifier

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://drills.dev/evidence/v1"


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE's Pre-Authentication Encoding of ``payload_type`` and ``body``."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body)


def statement(subjects: Mapping[str, str], predicate: dict[str, Any]) -> dict[str, Any]:
    """An in-toto Statement v1 over ``subjects`` (name -> sha256 hex), names sorted."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": name, "digest": {"sha256": digest}}
            for name, digest in sorted(subjects.items())
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def envelope(body: bytes, signer: Signer | None) -> dict[str, Any]:
    """A DSSE envelope of ``body``; with no signer, one without signatures (unsigned)."""
    signatures = []
    if signer is not None:
        sig = signer.sign(pae(PAYLOAD_TYPE, body))
        signatures.append({"keyid": signer.keyid, "sig": base64.b64encode(sig).decode("ascii")})
    return {
        "payload": base64.b64encode(body).decode("ascii"),
        "payloadType": PAYLOAD_TYPE,
        "signatures": signatures,
    }


class EnvelopeError(DrillError, ValueError):
    """An envelope that is not DSSE, or not an in-toto Statement of ours."""


@dataclass(frozen=True)
class Opened:
    body: bytes
    statement: dict[str, Any]
    signatures: list[dict[str, Any]]


def _b64(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise EnvelopeError(f"{what} is not a base64 string")
    try:
        # DSSE allows either alphabet, padded or not.
        text = value.replace("-", "+").replace("_", "/")
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise EnvelopeError(f"{what} is not valid base64") from None


def _json(raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise EnvelopeError(f"{what} is not valid JSON") from None
    except RecursionError:  # hostile nesting: ours is a few levels deep
        raise EnvelopeError(f"{what} is JSON nested too deeply to be ours") from None


def open_envelope(raw: bytes) -> Opened:
    """Parse an envelope and the Statement in it; signatures are checked by :func:`signed_by`."""
    env = _json(raw, "the envelope")
    if not isinstance(env, dict) or env.get("payloadType") != PAYLOAD_TYPE:
        raise EnvelopeError(f"not a DSSE envelope of type {PAYLOAD_TYPE}")
    body = _b64(env.get("payload"), "payload")
    signatures = env.get("signatures")
    if not isinstance(signatures, list) or not all(isinstance(s, dict) for s in signatures):
        raise EnvelopeError("signatures is not a list of signatures")
    found = _json(body, "payload")
    if not isinstance(found, dict) or found.get("_type") != STATEMENT_TYPE:
        raise EnvelopeError(f"payload is not an in-toto Statement ({STATEMENT_TYPE})")
    if found.get("predicateType") != PREDICATE_TYPE:
        raise EnvelopeError(f"predicateType is not {PREDICATE_TYPE}")
    if not isinstance(found.get("subject"), list):
        raise EnvelopeError("the Statement has no subject list")
    return Opened(body, found, signatures)


def verified_signature(opened: Opened, verifier: Verifier) -> dict[str, Any] | None:
    """The first signature of the envelope that verifies with ``verifier``'s key, or None.

    The keyid is a hint only (DSSE does not authenticate it): every signature is tried,
    and the caller compares the label of the one that verified with the key's own id."""
    message = pae(PAYLOAD_TYPE, opened.body)
    for signature in opened.signatures:
        try:
            sig = _b64(signature.get("sig"), "sig")
        except EnvelopeError:
            continue
        if verifier.verify(sig, message):
            return signature
    return None


def signed_by(opened: Opened, verifier: Verifier) -> bool:
    """True when one signature of the envelope verifies with ``verifier``'s key."""
    return verified_signature(opened, verifier) is not None


def subjects(found: dict[str, Any]) -> dict[str, str]:
    """name -> sha256 of a Statement's subjects; a malformed or repeated one is an error."""
    named: dict[str, str] = {}
    for subject in found["subject"]:
        name = subject.get("name") if isinstance(subject, dict) else None
        digest = subject.get("digest") if isinstance(subject, dict) else None
        sha = digest.get("sha256") if isinstance(digest, dict) else None
        if not isinstance(name, str) or not isinstance(sha, str) or name in named:
            raise EnvelopeError("a subject of the Statement is malformed or repeated")
        named[name] = sha
    return named
