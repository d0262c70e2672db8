"""One HTTP client for the lab's probes of the servers it runs on loopback.

A new httpx client loads the CA bundle (~18 ms of CPU), and a readiness poll every 50 ms
that made one per call spent about a quarter of a core waiting for Prometheus to start. The probes
ask plain-HTTP servers on 127.0.0.1, so no proxy from the environment applies to them.
"""

from __future__ import annotations

import functools

import httpx


@functools.cache
def loopback_client() -> httpx.Client:
    """The process's client for loopback probes (thread-safe; timeouts are per request)."""
    return httpx.Client(trust_env=False)
