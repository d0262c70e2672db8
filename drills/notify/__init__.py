"""Notifications: chat and mail messages about readiness changes, drills and incidents.

Typed notices (events), the readiness changes that deserve one (readiness), notices
about runs (runs), the message text (render) and delivery with Apprise in the
background (deliver). Below the checks and the takeover, which call it; above the
targets and the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drills.faces import lazy_face

if TYPE_CHECKING:
    from drills.notify.deliver import (
        EXIT_FLUSH_S,
        NOTIFY_ENV,
        REMIND_ENV,
        Batch,
        Delivery,
        notify,
        remind_after,
        subscribe,
    )
    from drills.notify.events import EventKind, Notice, Severity
    from drills.notify.readiness import ReadinessChanges, readiness_changes
    from drills.notify.render import UI_URL_ENV

__all__ = [
    "EXIT_FLUSH_S",
    "NOTIFY_ENV",
    "REMIND_ENV",
    "UI_URL_ENV",
    "Batch",
    "Delivery",
    "EventKind",
    "Notice",
    "ReadinessChanges",
    "Severity",
    "notify",
    "readiness_changes",
    "remind_after",
    "subscribe",
]

# Each name is imported from its module when first asked for: delivery loads Apprise and
# httpx, which a caller that only renders a notice never needs.
__getattr__ = lazy_face(
    __name__,
    {
        "deliver": [
            "Batch",
            "Delivery",
            "EXIT_FLUSH_S",
            "NOTIFY_ENV",
            "REMIND_ENV",
            "notify",
            "remind_after",
            "subscribe",
        ],
        "events": ["EventKind", "Notice", "Severity"],
        "readiness": ["ReadinessChanges", "readiness_changes"],
        "render": ["UI_URL_ENV"],
    },
)
