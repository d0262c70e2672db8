"""One adapter per external system; SDK errors are translated here, once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drills.faces import lazy_face

if TYPE_CHECKING:
    from drills.targets.prometheus_api import prometheus_for, prometheus_url
    from drills.targets.providers import installed, unusable
    from drills.targets.sites import Targets

__all__ = ["Targets", "installed", "prometheus_for", "prometheus_url", "unusable"]

# Each name is imported from its module when first asked for, so that importing the
# package costs nothing until one is used.
__getattr__ = lazy_face(
    __name__,
    {
        "prometheus_api": ["prometheus_for", "prometheus_url"],
        "providers": ["installed", "unusable"],
        "sites": ["Targets"],
    },
)
