"""Registry authentication as the OCI Distribution API negotiates it.

A registry answers 401 with a ``WWW-Authenticate`` challenge. ``Basic`` wants the
username and password on every request. ``Bearer realm=…,service=…,scope=…`` wants
a token from the realm (asked for with the username and password, or anonymously),
one per scope, cached until it expires. A token from the plan (``auth.token``) is
sent as it is. No credential ever appears in an error message.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
import time
from dataclasses import dataclass
from urllib.parse import urljoin

import httpx

from drills.errors import PermanentError
from drills.targets.http import status_error, translated
from drills.targets.retry import DEFAULT_POLICY, RetryPolicy, retry_call

log = logging.getLogger("drills.targets.registry")

# RFC 7235 auth-params: key=value or key="quoted value" (a scope may hold commas).
_PARAM = re.compile(r'([A-Za-z][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))')
_DEFAULT_TOKEN_LIFETIME_S = 60.0
_EXPIRY_MARGIN_S = 10.0


@dataclass(frozen=True)
class Challenge:
    scheme: str  # lower case: "basic" or "bearer"
    params: dict[str, str]


def parse_challenge(header: str) -> Challenge | None:
    """The first challenge of a ``WWW-Authenticate`` header, or None when there is none."""
    scheme, _, rest = header.strip().partition(" ")
    if not scheme:
        return None
    params = {
        m[1].lower(): (m[2] if m[2] else m[3]).replace('\\"', '"') for m in _PARAM.finditer(rest)
    }
    return Challenge(scheme.lower(), params)


def repository_scope(repository: str) -> str:
    return f"repository:{repository}:pull"


def auth_failed(target: str, response: httpx.Response) -> PermanentError:
    return PermanentError(
        target,
        f"authentication failed (HTTP {response.status_code} for "
        f"{response.request.method} {response.url.path}); check the site's registry auth",
    )


class Authenticator:
    """The Authorization header for each request, learnt from the registry's challenges.

    A username and password are sent only once the registry has asked for them; a
    static token from the plan goes with every request. Thread-safe: many lookups share
    one instance, and a token is fetched once per scope even when many threads need it
    at the same moment.
    """

    def __init__(
        self,
        target: str,
        http: httpx.Client,
        base_url: str,
        *,
        username: str | None = None,
        password: str | None = None,
        token: str | None = None,
        retry: RetryPolicy = DEFAULT_POLICY,
    ) -> None:
        self._target = target
        self._retry = retry
        self._http = http
        self._base_url = base_url
        self._basic = (username, password) if username is not None and password else None
        self._static_token = token
        self._basic_header = ""
        if self._basic is not None:
            raw = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
            self._basic_header = f"Basic {raw}"
        self._scheme: str | None = None  # learnt from the first challenge
        self._bearer: Challenge | None = None
        self._tokens: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()
        self._scope_locks: dict[str, threading.Lock] = {}

    def headers(self, scope: str) -> dict[str, str]:
        """Headers for a request needing ``scope`` ("" for the API root)."""
        if self._static_token:
            return {"Authorization": f"Bearer {self._static_token}"}
        if self._scheme == "basic" and self._basic_header:
            return {"Authorization": self._basic_header}
        if self._scheme == "bearer":
            return {"Authorization": f"Bearer {self._token(scope)}"}
        return {}

    def learn(self, response: httpx.Response, scope: str) -> str | None:
        """Take in a 401's challenge: the scope to retry with, or None when retrying is futile.

        Raises when the challenge cannot be met (Basic without credentials, an unknown
        scheme); returns None when the credentials just sent were refused.
        """
        challenge = parse_challenge(response.headers.get("WWW-Authenticate", ""))
        if challenge is None or self._static_token:
            return None
        if challenge.scheme == "basic":
            if self._basic is None:
                raise PermanentError(
                    self._target,
                    "the registry asks for a username and password; "
                    "give auth.username and auth.password for this site",
                )
            with self._lock:
                retry = self._scheme != "basic"
                self._scheme = "basic"
            return scope if retry else None
        if challenge.scheme == "bearer" and "realm" in challenge.params:
            asked = challenge.params.get("scope", scope)
            with self._lock:
                sent_bearer = self._scheme == "bearer"
                self._scheme, self._bearer = "bearer", challenge
                # A refused token may have expired early: one fresh fetch is worth a try.
                dropped = self._tokens.pop(asked, None) is not None
            return asked if (not sent_bearer or dropped or asked != scope) else None
        raise PermanentError(
            self._target, f"the registry asks for {challenge.scheme} authentication, unsupported"
        )

    def _token(self, scope: str) -> str:
        with self._lock:
            cached = self._tokens.get(scope)
            if cached and cached[1] > time.monotonic():
                return cached[0]
            scope_lock = self._scope_locks.setdefault(scope, threading.Lock())
        with scope_lock:
            with self._lock:
                cached = self._tokens.get(scope)
            if cached and cached[1] > time.monotonic():
                return cached[0]
            # A token request is a read: a flapping token service is retried.
            token, lifetime = retry_call(lambda: self._fetch_token(scope), policy=self._retry)
            with self._lock:
                expires = time.monotonic() + max(lifetime - _EXPIRY_MARGIN_S, 1.0)
                self._tokens[scope] = (token, expires)
            return token

    def _fetch_token(self, scope: str) -> tuple[str, float]:
        assert self._bearer is not None
        realm = urljoin(self._base_url + "/", self._bearer.params["realm"])
        params = (
            {"service": self._bearer.params["service"]} if "service" in self._bearer.params else {}
        )
        if scope:
            params["scope"] = scope
        with translated(f"{self._target} token service"):
            response = self._http.get(
                realm, params=params, auth=self._basic or httpx.USE_CLIENT_DEFAULT
            )
        if response.status_code in (401, 403):
            raise auth_failed(self._target, response)
        if response.status_code != 200:
            raise status_error(f"{self._target} token service", response)
        try:
            body = response.json()
            token = body.get("token") or body.get("access_token")
            lifetime = float(body.get("expires_in") or _DEFAULT_TOKEN_LIFETIME_S)
        except (ValueError, AttributeError, TypeError):
            token, lifetime = None, 0.0
        if not isinstance(token, str) or not token:
            raise PermanentError(self._target, "the token service answered without a token")
        log.debug("%s: token for scope %r, valid %.0fs", self._target, scope, lifetime)
        return token, lifetime
