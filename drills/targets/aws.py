"""boto3 clients with bounded waits, and botocore errors translated once, here."""

from __future__ import annotations

import functools
import threading
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
from botocore.parsers import ResponseParserError

from drills.errors import MisroutedError, PermanentError, TargetError, TemporaryError
from drills.targets.retry import DEFAULT_POLICY, RetryPolicy, TimedOut, retry_call

if TYPE_CHECKING:
    from drills.plan import AwsCredentials, DrillPlan
    from drills.plan.refs import SecretRef

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


_SESSION_LOCK = threading.Lock()


@functools.cache
def _session() -> boto3.session.Session:
    return boto3.session.Session()


def client(
    service: str,
    where: AwsEndpoint,
    *,
    read_timeout: float = READ_TIMEOUT_S,
    max_pool: int = 10,
) -> Any:
    """A boto3 client whose every call is bounded by connect and read timeouts.

    botocore's own retries are off: they would also repeat a read timeout (tripling a
    hung endpoint's wait) and writes alike. Adapters retry what is safe to repeat
    with :func:`call` (or :func:`drills.targets.retry.retry_call`).
    """
    config = Config(
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=read_timeout,
        retries={"mode": "standard", "total_max_attempts": 1},
        max_pool_connections=max_pool,
    )
    # Sessions are not thread-safe but their clients are; one session parses each
    # service model once instead of once per client (about 0.25 s each).
    with _SESSION_LOCK:
        return _session().client(
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
        return _client_error(target, exc)
    if isinstance(exc, NoCredentialsError):
        return PermanentError(target, "no AWS credentials found for this site")
    if isinstance(exc, ConnectTimeoutError | ReadTimeoutError):
        return TimedOut(target, f"timed out ({type(exc).__name__})", delay=0.0)
    if isinstance(exc, EndpointConnectionError):
        return TemporaryError(target, "cannot connect to the endpoint", delay=0.0)
    if isinstance(exc, ConnectionClosedError):
        return TemporaryError(target, "the connection was closed or reset", delay=0.0)
    if isinstance(exc, ResponseParserError):
        return PermanentError(target, f"malformed answer ({type(exc).__name__})")
    if isinstance(exc, BotoCoreError):
        return TemporaryError(target, f"{type(exc).__name__}: {exc}", delay=0.0)
    return PermanentError(target, f"{type(exc).__name__}: {exc}")


_NOT_AWS = "not the service asked (a misrouted proxy, or a wrong endpoint_url?)"


def _client_error(target: str, exc: ClientError) -> TargetError:
    code = error_code(exc)
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    message = exc.response.get("Error", {}).get("Message", "") or code
    cause = f"{code or status}: {message}"
    # botocore names the error by its status when the body held no AWS error.
    bare = code.isdigit()
    if bare and status < 500 and not str(exc.operation_name).startswith("Head"):
        # Every AWS error names itself (only a HEAD's answer has no body to do it): a bare
        # 4xx is some other server's, a misrouted proxy's or an endpoint not this service.
        return MisroutedError(target, f"HTTP {status} without an AWS error: {_NOT_AWS}")
    if bare and status >= 500:
        # S3's unparsable 200 answers are turned into such 500s too.
        cause += " (no AWS error in the body: a truncated or malformed answer, or a proxy's)"
    if code in _RETRYABLE_CODES or status >= 500:
        return TemporaryError(target, cause, delay=0.0)
    return PermanentError(target, cause)


@contextmanager
def translated(target: str) -> Iterator[None]:
    try:
        yield
    except (ClientError, BotoCoreError, ResponseParserError) as exc:
        raise translate(target, exc) from exc


def call(
    target: str, fn: Callable[..., T], /, *, retry: RetryPolicy = DEFAULT_POLICY, **kwargs: Any
) -> T:
    """``fn(**kwargs)`` with errors translated, retried on temporary failures.

    Only for reads and idempotent writes (a Route 53 UPSERT): anything else must go
    through :func:`translated` alone.
    """

    def once() -> T:
        with translated(target):
            return fn(**kwargs)

    return retry_call(once, policy=retry)
