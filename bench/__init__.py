"""Benchmarks: each module here has a ``main()`` that runs ours beside a peer and prints both."""

from typing import Any

# The DNS section of a benchmark plan that never touches DNS: valid, and never contacted.
PLACEHOLDER_DNS: dict[str, Any] = {
    "provider": "rfc2136",
    "servers": ["127.0.0.1:5353"],
    "zone": "bench.test.",
    "tsig": {"name": "k", "secret": "env:BENCH_TSIG"},
    "record": {"name": "api.bench.test.", "type": "A"},
    "primary_value": "127.0.0.2",
    "dr_value": "127.0.0.3",
}


def app_test(script: str, timeout: float) -> Any:
    """The app in AppTest as a page view of a running server sees it: the custom components
    scanned for once, as a server does at its start (tests.support.streamlit_scan)."""
    from streamlit.testing.v1 import AppTest

    from tests.support.streamlit_scan import scan_components_once

    scan_components_once()
    return AppTest.from_file(script, default_timeout=timeout)
