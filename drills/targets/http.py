"""httpx clients with bounded waits, and HTTP failures translated once, here."""

from __future__ import annotations

import functools
import ssl
from collections.abc import Iterator
from contextlib import contextmanager

import certifi
import httpx

from drills.errors import PermanentError, TargetError, TemporaryError
from drills.targets.retry import TimedOut

CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 10.0


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verified TLS context for every client: building one costs ~50-100 ms, and the
    fence check and smoke probes open clients inside the RTO."""
    return ssl.create_default_context(cafile=certifi.where())


def new_client(
    *,
    read_timeout: float = READ_TIMEOUT_S,
    max_connections: int = 32,
    headers: dict[str, str] | None = None,
) -> httpx.Client:
    return httpx.Client(
        timeout=httpx.Timeout(read_timeout, connect=CONNECT_TIMEOUT_S),
        limits=httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        ),
        headers=headers,
        follow_redirects=True,
        verify=_tls_context(),
    )


def translate(target: str, exc: httpx.HTTPError) -> TargetError:
    # delay=0: no hint from the server, so a retry goes at the retry policy's own pace.
    if isinstance(exc, httpx.TimeoutException):
        return TimedOut(target, f"timed out ({type(exc).__name__})", delay=0.0)
    if isinstance(exc, httpx.ConnectError):
        return TemporaryError(target, "connection refused or unreachable", delay=0.0)
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return TemporaryError(target, f"connection broken ({type(exc).__name__})", delay=0.0)
    return PermanentError(target, f"{type(exc).__name__}: {exc}")


def status_error(target: str, response: httpx.Response) -> TargetError:
    """The error for an unexpected status: 5xx and 429 may pass, other 4xx will not."""
    code = response.status_code
    cause = (
        f"HTTP {code} {response.reason_phrase} for {response.request.method} {response.url.path}"
    )
    if code >= 500 or code == 429:
        retry_after = response.headers.get("Retry-After", "")
        delay = float(retry_after) if retry_after.isdigit() else 0.0
        return TemporaryError(target, cause, delay=delay)
    return PermanentError(target, cause)


@contextmanager
def translated(target: str) -> Iterator[None]:
    try:
        yield
    except httpx.HTTPError as exc:
        raise translate(target, exc) from exc
