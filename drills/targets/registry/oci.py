"""A registry over the OCI Distribution v2 API: manifest digests by HEAD, concurrently.

One ``HEAD /v2/<repository>/manifests/<reference>`` answers whether an image exists
and what its digest is (``Docker-Content-Digest``), without downloading anything.
Many lookups share one pool of keep-alive connections, so comparing hundreds of
images costs a few hundred milliseconds rather than a process per image.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from urllib.parse import urlsplit

import httpx

from drills.errors import MisroutedError, PermanentError, TargetError
from drills.targets.http import READ_TIMEOUT_S, new_client, status_error, translated
from drills.targets.registry.auth import Authenticator, auth_failed, repository_scope
from drills.targets.registry.images import Ref, is_digest
from drills.targets.retry import DEFAULT_POLICY, RetryPolicy, retry_call

log = logging.getLogger("drills.targets.registry")

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
# distribution 2.8 answers 404 to a manifest request that does not accept its media type.
MANIFEST_TYPES = (OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_MANIFEST_LIST)
_ACCEPT = ", ".join(MANIFEST_TYPES)
# What registries answer for a repository or a manifest that is not there (Harbor: NOT_FOUND).
_ABSENT_CODES = frozenset({"MANIFEST_UNKNOWN", "NAME_UNKNOWN", "NOT_FOUND"})
_HASHES = {"sha256": hashlib.sha256, "sha384": hashlib.sha384, "sha512": hashlib.sha512}


class OciDistribution:
    """The manifest digests of one OCI Distribution v2 registry (distribution, Harbor...)."""

    def __init__(
        self,
        url: str,
        *,
        name: str = "registry",
        username: str | None = None,
        password: str | None = None,
        token: str | None = None,
        read_timeout: float = READ_TIMEOUT_S,
        max_connections: int = 32,
        retry: RetryPolicy = DEFAULT_POLICY,
    ) -> None:
        self.url = url.rstrip("/")
        self.retry = retry
        self.host = urlsplit(self.url).netloc
        self.plain_http = self.url.startswith("http://")
        self.target = f"{name} ({self.url})"
        self._http = new_client(
            read_timeout=read_timeout,
            max_connections=max_connections,
            headers={"Accept": _ACCEPT},
        )
        self._auth = Authenticator(
            self.target,
            self._http,
            self.url,
            username=username,
            password=password,
            token=token,
            retry=retry,
        )
        self._checked = False
        self._check_lock = threading.Lock()

    # -- one image -----------------------------------------------------------
    def digest(self, repository: str, reference: str) -> str | None:
        """The manifest digest of one image, None when absent; a read, so retried."""
        self._check_api()
        return retry_call(lambda: self._digest_once(repository, reference), policy=self.retry)

    def _digest_once(self, repository: str, reference: str) -> str | None:
        path = f"/v2/{repository}/manifests/{reference}"
        response = self._request("HEAD", path, repository_scope(repository))
        if response.status_code == 404:
            self._confirm_absent(path, repository)
            return None
        if response.status_code != 200:
            raise self._unexpected(response)
        self._check_media_type(response, repository, reference)
        found = response.headers.get("Docker-Content-Digest")
        if not found:
            # The header is optional in the OCI spec: hash the manifest itself.
            found = self._digest_of_body(path, repository, reference)
        if is_digest(reference) and found != reference:
            raise PermanentError(
                self.target, f"asked for {repository}@{reference}, the registry answered {found}"
            )
        return found

    # -- many images ------------------------------------------------------------
    def digests(self, refs: Iterable[Ref], *, concurrency: int = 32) -> dict[Ref, str | None]:
        unique = list(dict.fromkeys(refs))
        if not unique:
            return {}
        self._check_api()  # once, before the fan-out, so auth is learnt by one request
        results: dict[Ref, str | None] = {}
        with ThreadPoolExecutor(max(1, min(concurrency, len(unique)))) as pool:
            futures: dict[Future[str | None], Ref] = {
                pool.submit(self.digest, *ref): ref for ref in unique
            }
            done, pending = wait(futures, return_when=FIRST_EXCEPTION)
            for future in pending:
                future.cancel()
            for future in done:
                error = future.exception()
                if error is not None:
                    raise error
                results[futures[future]] = future.result()
        return results

    def close(self) -> None:
        self._http.close()

    # -- HTTP --------------------------------------------------------------------
    def _check_api(self) -> None:
        """``GET /v2/`` once: proves this is a registry and learns how it authenticates."""
        if self._checked:
            return
        with self._check_lock:
            if self._checked:
                return
            response = retry_call(self._api_root, policy=self.retry)
            if response.status_code == 404:
                raise MisroutedError(
                    self.target, "GET /v2/ answered 404: not an OCI Distribution v2 registry"
                )
            if response.status_code != 200:
                raise self._unexpected(response)
            self._checked = True

    def _api_root(self) -> httpx.Response:
        response = self._request("GET", "/v2/", "")
        if response.status_code >= 500 or response.status_code == 429:
            raise self._unexpected(response)  # temporary: retried by the caller
        return response

    def _confirm_absent(self, path: str, repository: str) -> None:
        """Return when the registry itself says the manifest is not there. A HEAD's 404 has
        no body, and a misrouted proxy answers 404 too: the GET's body names the error,
        as the distribution spec has every registry do."""
        response = self._request("GET", path, repository_scope(repository))
        try:
            errors = response.json().get("errors") if response.status_code == 404 else None
        except (ValueError, AttributeError):  # not JSON, or JSON but not an object
            errors = None
        codes = {e.get("code") for e in errors or () if isinstance(e, dict)}
        if codes & _ABSENT_CODES:
            return
        raise MisroutedError(
            self.target,
            f"HEAD {path} answered 404, and GET answered HTTP {response.status_code} without "
            "a registry's error code: not the registry asked (a misrouted proxy?)",
        )

    def _check_media_type(self, response: httpx.Response, repository: str, ref: str) -> None:
        """Refuse a manifest whose type drills cannot read: its digest would mean nothing."""
        media_type = response.headers.get("Content-Type", "").split(";")[0].strip()
        # Optional in the spec; a registry that omits it is judged by the digest alone.
        if media_type and media_type not in MANIFEST_TYPES:
            shown = media_type[:80].encode("ascii", errors="replace").decode("ascii")
            raise PermanentError(
                self.target,
                f"{repository}:{ref}: the manifest has an unknown media type {shown!r}; "
                f"expected one of {', '.join(MANIFEST_TYPES)}",
            )

    def _request(self, method: str, path: str, scope: str) -> httpx.Response:
        response = self._send(method, path, scope)
        if response.status_code == 401:
            retry_scope = self._auth.learn(response, scope)
            if retry_scope is not None:
                response = self._send(method, path, retry_scope)
            if response.status_code == 401:
                raise auth_failed(self.target, response)
        return response

    def _send(self, method: str, path: str, scope: str) -> httpx.Response:
        headers = self._auth.headers(scope)
        with translated(self.target):
            return self._http.request(method, self.url + path, headers=headers)

    def _digest_of_body(self, path: str, repository: str, reference: str) -> str:
        response = self._request("GET", path, repository_scope(repository))
        if response.status_code != 200:
            raise self._unexpected(response)
        algorithm = reference.split(":", 1)[0] if is_digest(reference) else "sha256"
        hasher = _HASHES.get(algorithm)
        if hasher is None:
            raise PermanentError(self.target, f"unsupported digest algorithm {algorithm}")
        return f"{algorithm}:{hasher(response.content).hexdigest()}"

    def _unexpected(self, response: httpx.Response) -> TargetError:
        if response.status_code == 403:
            return PermanentError(
                self.target,
                f"authentication failed: access denied (HTTP 403 for {response.request.method} "
                f"{response.url.path}); the site's registry credentials may not pull this",
            )
        return status_error(self.target, response)

    def __repr__(self) -> str:
        return f"OciDistribution({self.target})"
