"""One scan for Streamlit components a process, however many AppTests it makes.

On its first run, every AppTest reads the metadata of each installed distribution, looking
for custom components: 0.18 CPU-s here (0.4 to 0.9 s on a loaded machine), where a
Streamlit server scans once, at its start. The suite makes hundreds of AppTests, and a
benchmark times page views, not scans. The installed distributions do not change while a
process runs, so the first scan's answer serves the rest.
"""

from __future__ import annotations

import functools

from streamlit.components.v2 import manifest_scanner


def scan_components_once() -> None:
    """From now on in this process, Streamlit's component scan answers from its first run."""
    scan = manifest_scanner.scan_component_manifests
    if not hasattr(scan, "cache_info"):  # not cached yet: a second call changes nothing
        manifest_scanner.scan_component_manifests = functools.cache(scan)  # type: ignore[assignment]
