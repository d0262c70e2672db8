"""The HTTP clients of the lab's own calls to the servers it runs on loopback.

A new httpx client loads the CA bundle (~18 ms of CPU), and a readiness poll every 50 ms
that made one per call spent about a quarter of a core waiting for Prometheus to start. So
each thread keeps one client, and they share one SSL context. Not one client for all the
threads: httpx's pool (httpcore 1.0.9) can close an idle connection it has already handed to
another thread's request, which then reads a closed socket ("Bad file descriptor"). The
calls go to plain-HTTP servers on 127.0.0.1, so no proxy from the environment applies.
"""

from __future__ import annotations

import functools
import ssl
import threading

import httpx

# For a call that passes no timeout of its own: an image push (probes pass theirs).
DEFAULT_TIMEOUT_S = 10.0

_local = threading.local()


@functools.cache
def _tls() -> ssl.SSLContext:
    return httpx.create_ssl_context()


def loopback_client() -> httpx.Client:
    """This thread's client for calls to the lab's loopback servers."""
    client: httpx.Client | None = getattr(_local, "client", None)
    if client is None:
        client = httpx.Client(trust_env=False, verify=_tls(), timeout=DEFAULT_TIMEOUT_S)
        _local.client = client
    return client
