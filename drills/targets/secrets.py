"""Secrets, for fingerprinting only: AWS Secrets Manager, and the fields of any secret.

Values are read into memory to be fingerprinted (see :mod:`drills.targets.fingerprint`)
and go nowhere else: not into logs, errors, evidence or ``repr``. At the DR site
a replica secret is read from the DR region under the same id as at the primary.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from drills.errors import PermanentError
from drills.plan import DrillPlan, Site
from drills.targets import aws
from drills.targets.aws import AwsEndpoint
from drills.targets.retry import retry_call

log = logging.getLogger("drills.targets.secrets")

WHOLE_VALUE = "(value)"  # the field name of a secret that is not a JSON object
_DESCRIBED = (
    "Name",
    "CreatedDate",
    "LastChangedDate",
    "LastRotatedDate",
    "RotationEnabled",
    "PrimaryRegion",
    "ReplicationStatus",
)


class _NoResponseBodies(logging.Filter):
    """Blank the response bodies botocore logs at DEBUG: a GetSecretValue body is the secret."""

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith("Response body"):
            record.msg, record.args = "Response body: (not logged by drills)", ()
        return True


def _hush_response_bodies() -> None:
    parsers = logging.getLogger("botocore.parsers")
    if not any(isinstance(f, _NoResponseBodies) for f in parsers.filters):
        parsers.addFilter(_NoResponseBodies())


def endpoint_for(role: str, site: Site, plan: DrillPlan) -> AwsEndpoint:
    """The site's AWS region, endpoint and resolved credentials."""
    if site.aws is None:
        raise PermanentError(
            f"secretsmanager {role}", "the site has no aws section, so no Secrets Manager"
        )
    return aws.resolve_endpoint(plan, site.aws.region, site.aws.endpoint_url, site.aws.credentials)


class AwsSecrets:
    """One site's Secrets Manager, read-only."""

    def __init__(
        self, where: AwsEndpoint, role: str = "", *, read_timeout: float = aws.READ_TIMEOUT_S
    ) -> None:
        _hush_response_bodies()  # whoever turns on DEBUG logging must not get values
        self.target = where.describe(f"secretsmanager {role}".strip())
        self.region = where.region
        self._client = aws.client("secretsmanager", where, read_timeout=read_timeout)

    @classmethod
    def for_site(
        cls,
        role: str,
        site: Site,
        plan: DrillPlan,
        *,
        read_timeout: float = aws.READ_TIMEOUT_S,
    ) -> AwsSecrets:
        return cls(endpoint_for(role, site, plan), role, read_timeout=read_timeout)

    def __repr__(self) -> str:
        return f"AwsSecrets({self.target!r})"

    def _missing(self, exc: ClientError) -> bool:
        return aws.error_code(exc) == "ResourceNotFoundException"

    def describe(self, secret_id: str) -> dict[str, Any] | None:
        """Dates and replication of a secret (no value), or None when it does not exist.

        Keys, when present: Name, CreatedDate, LastChangedDate, LastRotatedDate
        (aware datetimes), RotationEnabled, PrimaryRegion (set only on a replica)
        and ReplicationStatus (a list of {Region, Status, ...}, on a primary).
        """

        def once() -> dict[str, Any] | None:
            try:
                found: dict[str, Any] = self._client.describe_secret(SecretId=secret_id)
            except ClientError as exc:
                if self._missing(exc):
                    return None
                raise aws.translate(self.target, exc) from exc
            except BotoCoreError as exc:
                raise aws.translate(self.target, exc) from exc
            return found

        found = retry_call(once)
        if found is None:
            return None
        return {key: found[key] for key in _DESCRIBED if key in found}

    def value(self, secret_id: str) -> bytes | None:
        """The current value (SecretString as UTF-8, or SecretBinary), None when absent.

        Only for fingerprinting: never log it, return it further or put it in an error.
        """

        def once() -> dict[str, Any] | None:
            try:
                found: dict[str, Any] = self._client.get_secret_value(SecretId=secret_id)
            except ClientError as exc:
                if self._missing(exc):
                    return None
                raise aws.translate(self.target, exc) from None  # the chain is not needed
            except BotoCoreError as exc:
                raise aws.translate(self.target, exc) from exc
            return found

        found = retry_call(once)
        if found is None:
            return None
        if found.get("SecretString") is not None:
            return str(found["SecretString"]).encode("utf-8")
        binary = found.get("SecretBinary")
        return bytes(binary) if binary is not None else b""

    def close(self) -> None:
        self._client.close()


# -- the fields of a secret, for per-field fingerprints ------------------------------


def kube_secret_fields(secret: dict[str, Any]) -> dict[str, bytes]:
    """A Kubernetes Secret's keys and their decoded values."""
    fields: dict[str, bytes] = {}
    for name, encoded in (secret.get("data") or {}).items():
        text = str(encoded or "")
        try:
            fields[str(name)] = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            fields[str(name)] = text.encode()  # still comparable, just not decoded
    return fields


def aws_secret_fields(raw: bytes) -> dict[str, bytes]:
    """A Secrets Manager value as fields: a JSON object's keys, else one whole value.

    Most secrets are JSON objects (``{"username": ..., "password": ...}``); comparing
    them per key tells an operator which credential drifted without showing any.
    """
    try:
        parsed = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {WHOLE_VALUE: raw}
    if not isinstance(parsed, dict):
        return {WHOLE_VALUE: raw}
    return {
        str(name): (value.encode() if isinstance(value, str) else _canonical(value))
        for name, value in parsed.items()
    }


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
