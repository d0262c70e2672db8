"""Every notice a flow run sends, also as a Prefect event (``drills.readiness.changed``,
``drills.run.finished``…) with the plan as its resource, for Prefect automations."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from prefect.events import emit_event

from drills.notify import Notice, subscribe

RESOURCE_PREFIX = "drills.plan."


def emit(notice: Notice) -> None:
    emit_event(
        event=notice.kind.event_name,
        resource={
            "prefect.resource.id": f"{RESOURCE_PREFIX}{notice.plan}",
            "prefect.resource.name": notice.plan,
            "drills.severity": notice.severity.value,
        },
        payload={"title": notice.title, "changed": list(notice.changed), **notice.payload},
    )


@contextmanager
def notices_as_events() -> Iterator[None]:
    """Within the block, each notice of this process is also emitted as a Prefect event."""
    unsubscribe = subscribe(emit)
    try:
        yield
    finally:
        unsubscribe()
