"""Kubernetes client and urllib3 failures translated once, here, into drills errors.

The official client raises ``ApiException`` for an HTTP error status (its body
is the API server's ``Status``) and for a TLS failure (status 0), and lets
urllib3's own exceptions through for connection trouble. Callers above the
adapter see only :class:`~drills.errors.TargetError` subclasses.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from drills.errors import MisroutedError, PermanentError, TargetError, TemporaryError
from drills.targets.retry import TimedOut


class WaitStopped(TargetError):  # noqa: N818 - reads as what happened
    """The caller stopped waiting (its run is being cancelled) before the workload was ready."""

    def __init__(self, target: str, what: str) -> None:
        super().__init__(target, f"{what}: stopped waiting, the run is being cancelled")


class NotReadyInTime(TargetError):  # noqa: N818 - reads as what happened
    """A workload did not reach the wanted ready replicas before the deadline.

    Neither temporary nor a step failure: the caller (a drill step) decides what
    it means. ``ready``/``desired`` are the last counts observed; ``observed`` is
    the last object seen (a plain dict), or None when none was seen.
    """

    def __init__(
        self, target: str, what: str, ready: int, desired: int, observed: dict[str, Any] | None
    ) -> None:
        self.ready = ready
        self.desired = desired
        self.observed = observed
        super().__init__(target, f"{what}: {ready}/{desired} replicas ready at the deadline")


def _body(exc: ApiException) -> dict[str, Any]:
    """The error's body as a JSON object (the API server's ``Status``); {} when it is not."""
    try:
        body = json.loads(exc.body or "")
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def status_message(exc: ApiException) -> str:
    """The API server's own words (a ``Status`` message), or the HTTP reason."""
    message = _body(exc).get("message")
    if isinstance(message, str) and message:
        return message
    return str(exc.reason or "no reason given")


def answered_404(exc: BaseException) -> bool:
    """Whether a translated error came of an HTTP 404, whatever it was taken to mean."""
    return isinstance(exc.__cause__, ApiException) and exc.__cause__.status == 404


def named_not_found(exc: BaseException | None) -> str | None:
    """The name of the object a 404 says is not there, when the API server said so.

    An API server's NotFound for one object is a ``Status`` whose details name it
    (``secrets "x" not found``). A 404 without one (an empty body, an error page, "the
    server could not find the requested resource") says nothing about any object: the
    path itself was not found, which a cluster serving the type never answers.
    """
    if not isinstance(exc, ApiException) or exc.status != 404:
        return None
    status = _body(exc)
    details = status.get("details")
    name = details.get("name") if isinstance(details, dict) else None
    if status.get("kind") != "Status" or status.get("reason") != "NotFound":
        return None
    return name if isinstance(name, str) and name else None


MISROUTED_HINT = (
    "not the Kubernetes API asked (a misrouted proxy, a wrong path prefix or a stale ingress?)"
)


def _tls_cause(exc: ApiException) -> str:
    # The client folds urllib3's SSLError into status 0 with "SSLError\n<detail>".
    lines = [line for line in str(exc.reason or "").splitlines() if line.strip()]
    return "TLS failure: " + (lines[-1] if lines else "unknown")


def translate(target: str, exc: Exception) -> TargetError:
    """One client exception as a drills error that says what failed and whether to retry."""
    if isinstance(exc, ApiException):
        return _api_error(target, exc)
    if isinstance(exc, urllib3.exceptions.HTTPError):
        return _connection_error(target, exc)
    return PermanentError(target, f"{type(exc).__name__}: {exc}")


def _api_error(target: str, exc: ApiException) -> TargetError:
    status = int(exc.status or 0)
    if status == 0:
        cause = _tls_cause(exc)
        if "CERTIFICATE_VERIFY_FAILED" in cause or "hostname" in cause.lower():
            return PermanentError(target, cause)
        return TemporaryError(target, cause, delay=0.0)
    cause = f"HTTP {status}: {status_message(exc)}"
    if status == 404 and named_not_found(exc) is None:
        return MisroutedError(target, f"{cause}: {MISROUTED_HINT}")
    if status == 429 or status >= 500:
        retry_after = str((exc.headers or {}).get("Retry-After", ""))
        delay = float(retry_after) if retry_after.isdigit() else 0.0
        return TemporaryError(target, cause, delay=delay)
    # 401/403/404 of one object/409/422 and the rest: the credentials, object or request
    # is wrong. A 404 of one object is "absent" only once discovery shows its type served.
    return PermanentError(target, cause)


def _connection_error(target: str, exc: urllib3.exceptions.HTTPError) -> TargetError:
    # delay=0 throughout: no hint from the server, so a retry goes at the policy's own pace.
    if isinstance(exc, urllib3.exceptions.NewConnectionError):
        return TemporaryError(target, "connection refused or unreachable", delay=0.0)
    if isinstance(exc, urllib3.exceptions.TimeoutError):
        return TimedOut(target, f"timed out ({type(exc).__name__})", delay=0.0)
    if isinstance(exc, urllib3.exceptions.MaxRetryError):
        reason = exc.reason
        if reason is not None and isinstance(reason, Exception):
            return translate(target, reason)
        return TemporaryError(target, "connection failed", delay=0.0)
    if isinstance(exc, urllib3.exceptions.ProtocolError):
        return TemporaryError(target, f"connection broken ({type(exc).__name__})", delay=0.0)
    return TemporaryError(target, f"{type(exc).__name__}", delay=0.0)


def _preview(data: bytes) -> str:
    """What answered instead of JSON: the start of an error page, or only its size.

    A body that starts like JSON is an object cut short, maybe a Secret's: none of
    it is shown.
    """
    if not data:
        return "empty body"
    if data.lstrip()[:1] in (b"{", b"["):
        return f"{len(data)} bytes of truncated or invalid JSON"
    text = data[:60].decode("utf-8", errors="replace")
    shown = "".join(c if c.isprintable() else "?" for c in text)
    return f"{len(data)} bytes: {shown!r}"


def json_object(target: str, request: str, data: bytes) -> dict[str, Any]:
    """The API's reply as a JSON object, or a MisroutedError saying what came instead.

    A proxy's error page or a body of the wrong shape is not something a retry fixes,
    nor an answer of the API asked.
    """
    try:
        found = json.loads(data)
    except ValueError:
        raise MisroutedError(
            target, f"{request}: the reply is not JSON ({_preview(data)})"
        ) from None
    if not isinstance(found, dict):
        raise MisroutedError(
            target, f"{request}: the reply is JSON {type(found).__name__}, not an object"
        )
    return found


@contextmanager
def translated(target: str) -> Iterator[None]:
    try:
        yield
    except (ApiException, urllib3.exceptions.HTTPError) as exc:
        raise translate(target, exc) from exc
