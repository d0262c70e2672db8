"""boto3 clients with bounded waits, and botocore errors translated once, here."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)

from drills.errors import PermanentError, TargetError, TemporaryError

if TYPE_CHECKING:
    from drills.plan import AwsCredentials, DrillPlan
    from drills.refs import SecretRef

T = TypeVar("T")

CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 10.0

# Codes AWS documents as worth retrying; everything else in a 4xx is our fault.
_RETRYABLE_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "TooManyRequestsException",
        "SlowDown",
        "RequestTimeout",
        "RequestTimeoutException",
        "ServiceUnavailable",
        "InternalError",
        "InternalFailure",
        "PriorRequestNotComplete",
    }
)


@dataclass(frozen=True)
class AwsEndpoint:
    """Where and as whom to reach one AWS(-compatible) service. Secrets already resolved."""

    region: str
    endpoint_url: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None

    def describe(self, service: str) -> str:
        return f"{service} {self.region}" + (f" ({self.endpoint_url})" if self.endpoint_url else "")

    def __repr__(self) -> str:  # never show the key, even in a debugger or a log
        return f"AwsEndpoint(region={self.region!r}, endpoint_url={self.endpoint_url!r})"


def resolve_endpoint(
    plan: DrillPlan,
    region: str,
    endpoint_url: object | None,
    credentials: AwsCredentials | None,
) -> AwsEndpoint:
    """An endpoint with the plan's credential references resolved (None: boto3's default chain)."""

    def secret(ref: SecretRef | None) -> str | None:
        return plan.resolve_secret(ref) if ref is not None else None

    return AwsEndpoint(
        region=region,
        endpoint_url=str(endpoint_url) if endpoint_url else None,
        access_key_id=secret(credentials.access_key_id) if credentials else None,
        secret_access_key=secret(credentials.secret_access_key) if credentials else None,
        session_token=secret(credentials.session_token) if credentials else None,
    )


def client(
    service: str,
    where: AwsEndpoint,
    *,
    read_timeout: float = READ_TIMEOUT_S,
    max_pool: int = 10,
) -> Any:
    """A boto3 client whose every call is bounded by connect and read timeouts."""
    config = Config(
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=read_timeout,
        retries={"mode": "standard", "max_attempts": 3},
        max_pool_connections=max_pool,
    )
    return boto3.session.Session().client(
        service,
        region_name=where.region,
        endpoint_url=where.endpoint_url,
        aws_access_key_id=where.access_key_id,
        aws_secret_access_key=where.secret_access_key,
        aws_session_token=where.session_token,
        config=config,
    )


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def translate(target: str, exc: Exception) -> TargetError:
    """One botocore exception as a drills error that says what failed and whether to retry."""
    if isinstance(exc, ClientError):
        code = error_code(exc)
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        message = exc.response.get("Error", {}).get("Message", "") or code
        cause = f"{code or status}: {message}"
        if code in _RETRYABLE_CODES or status >= 500:
            return TemporaryError(target, cause, delay=1.0)
        return PermanentError(target, cause)
    if isinstance(exc, NoCredentialsError):
        return PermanentError(target, "no AWS credentials found for this site")
    if isinstance(exc, ConnectTimeoutError | ReadTimeoutError):
        return TemporaryError(target, f"timed out ({type(exc).__name__})")
    if isinstance(exc, EndpointConnectionError | ConnectionClosedError):
        return TemporaryError(target, "cannot connect to the endpoint")
    if isinstance(exc, BotoCoreError):
        return TemporaryError(target, f"{type(exc).__name__}: {exc}")
    return PermanentError(target, f"{type(exc).__name__}: {exc}")


@contextmanager
def translated(target: str) -> Iterator[None]:
    try:
        yield
    except (ClientError, BotoCoreError) as exc:
        raise translate(target, exc) from exc


def call(target: str, fn: Callable[..., T], /, **kwargs: Any) -> T:
    with translated(target):
        return fn(**kwargs)
