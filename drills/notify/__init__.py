"""Notifications: chat and mail messages about readiness changes, drills and incidents.

Typed notices (events), the readiness changes that deserve one (readiness), notices
about runs (runs), the message text (render) and delivery with Apprise in the
background (deliver). Below the checks and the takeover, which call it; above the
targets and the store.
"""

from drills.notify.deliver import (
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
from drills.notify.render import UI_URL_ENV, render

__all__ = [
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
    "render",
    "subscribe",
]
