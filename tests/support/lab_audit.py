"""The requests a lab site's API server answered, from its audit log (`lab up --audit`)."""

from __future__ import annotations

from pathlib import Path

from drills_lab.kubeapi.audit import AuditEvent, read_audit_file
from drills_lab.runtime import LabInfo, audit_file


class AuditCursor:
    """The requests a site's API server answered since the cursor was made, or last moved
    past them (``take``)."""

    def __init__(self, info: LabInfo, site: str) -> None:
        self.path = Path(info.state_dir) / audit_file(site)
        self.start = len(read_audit_file(self.path))

    def since(self) -> list[AuditEvent]:
        return read_audit_file(self.path)[self.start :]

    def take(self) -> list[AuditEvent]:
        """The requests since, and the cursor moves past them."""
        events = self.since()
        self.start += len(events)
        return events

    def written(self) -> set[str]:
        """The objects (``namespace/name``) that a request since has written."""
        return {f"{e.namespace}/{e.name}" for e in self.since() if e.is_write}
