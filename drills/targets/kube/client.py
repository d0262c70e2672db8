"""Kubernetes through the official ``kubernetes`` client, one private client per site.

Each site gets its own ``Configuration`` (from its kubeconfig, CA included, or
the in-cluster account) and ``ApiClient``; the process-wide default is never
touched. Requests go through the client's ``ApiClient`` (auth, TLS, urllib3
pool, ``ApiException``) by resource path, and replies are returned as the API's
plain JSON dicts. The generated ``*Api`` classes and models are not used: they
cost ~1.5 s of import and pydantic validation per process, half the budget of a
whole readiness run, for objects the callers would turn back into dicts anyway.

Every request carries ``_request_timeout=(connect, read)``; the client's own
urllib3 retries are off (they would triple every timeout); every client or
urllib3 exception is translated once, in :mod:`drills.targets.kube.errors`.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from typing import Any

import urllib3.exceptions
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.client.rest import RESTResponse

from drills.errors import PermanentError, TemporaryError
from drills.plan import DrillPlan, Site
from drills.targets.kube.config import site_configuration
from drills.targets.kube.discovery import Discovery, only_named_404s
from drills.targets.kube.errors import (
    NotReadyInTime,
    WaitStopped,
    answered_404,
    json_object,
    translate,
    translated,
)
from drills.targets.kube.watch import Watched, follow, settled
from drills.targets.retry import DEFAULT_POLICY, RetryPolicy, TimedOut, retry_call

log = logging.getLogger("drills.targets.kube")

CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 10.0
# With a stop event, a watch lasts at most this long before the event is checked again.
STOP_CHECK_S = 1.0
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
_COLLECTIONS = {
    "Deployment": "/apis/apps/v1/namespaces/{namespace}/deployments",
    "StatefulSet": "/apis/apps/v1/namespaces/{namespace}/statefulsets",
}
Query = Sequence[tuple[str, str]]
# GETs are reads, and every PATCH drills sends is a merge patch to a value (replicas,
# an ingress class): sending it twice leaves what sending it once does.
_RETRIED_METHODS = frozenset({"GET", "PATCH"})


def _kind(kind: str) -> str:
    value = str(getattr(kind, "value", kind))
    if value not in _COLLECTIONS:
        raise ValueError(
            f"unsupported workload kind {kind!r}; expected one of {list(_COLLECTIONS)}"
        )
    return value


class KubeTarget:
    """One site's Kubernetes API: reads for the checks, and the few writes a drill makes."""

    def __init__(
        self,
        api: client.ApiClient,
        target: str,
        *,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        read_timeout: float = READ_TIMEOUT_S,
        retry: RetryPolicy = DEFAULT_POLICY,
    ) -> None:
        self._api = api
        self.target = target
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.retry = retry
        self._discovery = Discovery(target, lambda path: self._json("GET", path))

    @classmethod
    def for_site(
        cls,
        role: str,
        site: Site,
        plan: DrillPlan,
        *,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        read_timeout: float = READ_TIMEOUT_S,
        retry: RetryPolicy = DEFAULT_POLICY,
    ) -> KubeTarget:
        cfg = site_configuration(role, site.kubernetes, plan)
        return cls(
            client.ApiClient(configuration=cfg),
            f"kubernetes {role} ({cfg.host})",
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retry=retry,
        )

    @property
    def describe(self) -> str:
        return self.target

    def __repr__(self) -> str:
        return f"KubeTarget({self.target!r})"

    # -- transport -------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        params: dict[str, str] | None = None,
        *,
        query: Query = (),
        body: Any = None,
        timeout: tuple[float, float] | None = None,
    ) -> RESTResponse:
        """One request; the response is unread (a watch streams it). Raises TargetError."""
        headers = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = MERGE_PATCH if method == "PATCH" else JSON
        with only_named_404s(path, params or {}), translated(self.target):
            method, url, headers, body, _ = self._api.param_serialize(
                method=method,
                resource_path=path,
                path_params=params,
                query_params=list(query) or None,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            resp = self._api.call_api(
                method,
                url,
                header_params=headers,
                body=body,
                _request_timeout=timeout or (self.connect_timeout, self.read_timeout),
            )
            if not 200 <= resp.status <= 299:
                text = resp.read().decode("utf-8", errors="replace")
                raise ApiException.from_response(http_resp=resp, body=text, data=None)
        return resp

    def _json(
        self,
        method: str,
        path: str,
        params: dict[str, str] | None = None,
        *,
        query: Query = (),
        body: Any = None,
    ) -> dict[str, Any]:
        """One JSON object from the API, retried when the method is safe to repeat."""

        def once() -> dict[str, Any]:
            resp = self._send(method, path, params, query=query, body=body)
            with translated(self.target):
                data = resp.read()
            return json_object(self.target, f"{method} {path}", data)

        if method in _RETRIED_METHODS:
            return retry_call(once, policy=self.retry)
        return once()

    def _get_or_none(self, path: str, params: dict[str, str]) -> dict[str, Any] | None:
        """The object, or None when the API server says it does not exist (see
        :mod:`drills.targets.kube.discovery`: a misrouted 404 raises MisroutedError)."""
        try:
            found = self._json("GET", path, params)
        except PermanentError as exc:
            if not answered_404(exc):
                raise
            self._discovery.confirm_absent(path, params, exc)
            return None
        return dict(found)

    # -- reads -----------------------------------------------------------------

    def version(self) -> tuple[int, int, str]:
        """(major, minor, gitVersion) from ``/version``; "30+" style minors read as 30."""
        info = self._json("GET", "/version")
        git = str(info.get("gitVersion", "?"))
        try:
            major = int("".join(c for c in str(info.get("major", "")) if c.isdigit()))
            minor = int("".join(c for c in str(info.get("minor", "")) if c.isdigit()))
        except ValueError:
            raise PermanentError(
                self.target, f"/version has no numeric major/minor ({git})"
            ) from None
        return major, minor, git

    def nodes(self) -> list[dict[str, Any]]:
        return list(self._json("GET", "/api/v1/nodes").get("items") or [])

    def workload(self, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
        """A Deployment or StatefulSet, or None when it does not exist."""
        path = _COLLECTIONS[_kind(kind)] + "/{name}"
        return self._get_or_none(path, {"namespace": namespace, "name": name})

    def pods(self, namespace: str | None, label_selector: str = "") -> list[dict[str, Any]]:
        """Pods matching ``label_selector`` in ``namespace`` (every namespace when None)."""
        query = [("labelSelector", label_selector)] if label_selector else []
        if namespace is None:
            listing = self._json("GET", "/api/v1/pods", query=query)
        else:
            path = "/api/v1/namespaces/{namespace}/pods"
            listing = self._json("GET", path, {"namespace": namespace}, query=query)
        return list(listing.get("items") or [])

    def secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The raw Secret, values included: fingerprint it, never log or pass it on."""
        path = "/api/v1/namespaces/{namespace}/secrets/{name}"
        return self._get_or_none(path, {"namespace": namespace, "name": name})

    def ingress(self, namespace: str, name: str) -> dict[str, Any] | None:
        path = "/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses/{name}"
        return self._get_or_none(path, {"namespace": namespace, "name": name})

    def namespace(self, name: str) -> dict[str, Any] | None:
        return self._get_or_none("/api/v1/namespaces/{name}", {"name": name})

    def config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        path = "/api/v1/namespaces/{namespace}/configmaps/{name}"
        return self._get_or_none(path, {"namespace": namespace, "name": name})

    def read(self, path: str, params: dict[str, str] | None = None) -> dict[str, Any] | None:
        """Any object by its resource path (``{name}`` style placeholders), None when absent."""
        return self._get_or_none(path, params or {})

    def list_items(
        self, path: str, params: dict[str, str] | None = None, label_selector: str = ""
    ) -> list[dict[str, Any]]:
        """The items of any collection by its resource path; [] when its API is not served.

        A 404 on a collection reads as "none of these here" only for an API group that
        discovery shows is not installed (no Kueue, say); for a built-in type, or with
        discovery not answering as an API server does, it raises MisroutedError.
        """
        query = [("labelSelector", label_selector)] if label_selector else []
        try:
            listing = self._json("GET", path, params, query=query)
        except PermanentError as exc:
            if not answered_404(exc):
                raise
            self._discovery.confirm_not_served(path, params or {}, exc)
            return []
        return list(listing.get("items") or [])

    @property
    def server(self) -> str:
        """The API server's URL, as the kubeconfig (or the in-cluster account) gave it."""
        return str(self._api.configuration.host)

    @property
    def ca_file(self) -> str | None:
        """The CA bundle trusted for the API server; None when the system's (or none) is."""
        ca = self._api.configuration.ssl_ca_cert
        return str(ca) if ca else None

    # -- writes, for the drill ---------------------------------------------------

    def scale(self, namespace: str, kind: str, name: str, replicas: int) -> None:
        """Set replicas through the scale subresource (what ``kubectl scale`` does)."""
        path = _COLLECTIONS[_kind(kind)] + "/{name}/scale"
        body = {"spec": {"replicas": int(replicas)}}
        self._json("PATCH", path, {"namespace": namespace, "name": name}, body=body)
        log.info("%s: scaled %s %s/%s to %d", self.target, kind, namespace, name, replicas)

    def patch_ingress_class(self, namespace: str, name: str, ingress_class: str | None) -> None:
        """Set ``spec.ingressClassName``; None removes it, which detaches the controller."""
        path = "/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses/{name}"
        body = {"spec": {"ingressClassName": ingress_class}}
        self._json("PATCH", path, {"namespace": namespace, "name": name}, body=body)
        log.info("%s: ingress %s/%s class set to %s", self.target, namespace, name, ingress_class)

    def merge_patch(
        self, path: str, params: dict[str, str], body: dict[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        """A JSON merge patch of any object by its resource path; with ``dry_run`` the server
        checks it (authorization, admission, validation) and stores nothing."""
        query: Query = (("dryRun", "All"),) if dry_run else ()
        return self._json("PATCH", path, params, query=query, body=body)

    def wait_ready(
        self,
        namespace: str,
        kind: str,
        name: str,
        replicas: int,
        deadline_s: float,
        stop: threading.Event | None = None,
    ) -> dict[str, Any]:
        """Watch one workload until ``replicas`` are ready; return the final object.

        It lists with a field selector to get a resourceVersion, then watches from
        there (no polling), re-listing if the watch expires. Raises
        :class:`NotReadyInTime` with the last counts seen at the deadline, and
        :class:`WaitStopped` within about a second of ``stop`` being set: a thread
        blocked on a watch cannot be interrupted, so it watches in short windows.
        """
        kind = _kind(kind)
        watched = Watched(_COLLECTIONS[kind], namespace, name)
        deadline = time.monotonic() + deadline_s
        last: dict[str, Any] | None = None
        rv: str | None = None
        while True:
            if rv is None:
                last, rv = self._list_one(watched)
                if last is not None and settled(last, replicas)[1]:
                    return last
            if stop is not None and stop.is_set():
                raise WaitStopped(self.target, f"{kind} {namespace}/{name}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            window = min(remaining, STOP_CHECK_S) if stop is not None else remaining
            done, last, rv = self._watch_window(watched, window, deadline, last, rv, replicas)
            if done:
                assert last is not None
                return last
        ready = settled(last, replicas)[0] if last is not None else 0
        raise NotReadyInTime(self.target, f"{kind} {namespace}/{name}", ready, replicas, last)

    def _list_one(self, watched: Watched) -> tuple[dict[str, Any] | None, str]:
        """The workload as listed now, and the resourceVersion to watch from."""
        listing = self._json("GET", watched.collection, watched.params, query=[watched.selector])
        items = listing.get("items") or []
        rv = str((listing.get("metadata") or {}).get("resourceVersion") or "")
        return (items[0] if items else None), rv

    def _watch_window(
        self,
        watched: Watched,
        window: float,
        deadline: float,
        last: dict[str, Any] | None,
        rv: str,
        replicas: int,
    ) -> tuple[bool, dict[str, Any] | None, str | None]:
        """Watch from ``rv`` for at most ``window`` seconds: (settled?, last object seen,
        resourceVersion to resume at); a None resourceVersion asks for a re-list."""
        window_end = time.monotonic() + window
        query = [
            watched.selector,
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(math.ceil(window) + 1)),
        ] + ([("resourceVersion", rv)] if rv else [])
        # The socket waits a little past the window, so a silent stream ends in a
        # read timeout just after it; the server-side timeout is a second bound.
        try:
            resp = self._send(
                "GET",
                watched.collection,
                watched.params,
                query=query,
                timeout=(self.connect_timeout, window + 0.25),
            )
            return follow(self.target, resp, last, rv, replicas)
        except urllib3.exceptions.ReadTimeoutError as exc:
            if time.monotonic() < window_end:
                raise translate(self.target, exc) from exc
            return False, last, rv  # the stream stayed quiet all window: nothing changed
        except TimedOut:
            if time.monotonic() < window_end:
                raise
            return False, last, rv  # no headers within the window: as quiet as an idle stream
        except TemporaryError as exc:
            # A dropped watch (reset, 5xx) loses nothing: re-list and watch again,
            # within the same deadline.
            log.info(
                "%s: watch of %s/%s broke (%s); re-listing",
                self.target,
                watched.namespace,
                watched.name,
                exc.cause,
            )
            time.sleep(min(self.retry.base_delay_s, max(0.0, deadline - time.monotonic())))
            return False, last, None

    def close(self) -> None:
        self._api.close()
