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


_components: list[Any] = []  # the custom components, found once as a server's Runtime does


def app_test(script: str, timeout: float) -> Any:
    """The app in AppTest as a page view of a running server sees it. AppTest (Streamlit
    1.5x and later) scans every installed package for custom components on each new app's
    first run, 0.4–0.9 s here, which a server does once at its start: scanned once, shared."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(script, default_timeout=timeout)
    if hasattr(at, "_bidi_component_manager"):
        if not _components:
            from streamlit.components.v2.component_manager import BidiComponentManager

            _components.append(BidiComponentManager())
            _components[0].discover_and_register_components(start_file_watching=False)
        at._bidi_component_manager = _components[0]
    return at
