"""Notices about incidents proposed by alerts: proposed (with a link to the Incident page,
where an operator approves it), and withdrawn when its alerts resolved first."""

from __future__ import annotations

import datetime as dt

from drills.notify.events import EventKind, Notice, Severity


def _page(proposal_id: str) -> str:
    return f"declare?proposal={proposal_id}"


def incident_proposed(
    plan: str, proposal_id: str, alertname: str, detected_at: dt.datetime, summary: str
) -> Notice:
    changed = [
        f"alert {alertname} (firing since {detected_at.isoformat(timespec='seconds')}) "
        f"proposes an incident on {plan}",
        "nothing has been started: an operator approves it on the Incident page",
    ]
    if summary:
        changed.append(f"alert summary: {summary}")
    return Notice(
        EventKind.INCIDENT_PROPOSED,
        plan,
        f"{plan}: incident proposed by alert {alertname}",
        tuple(changed),
        Severity.WARNING,
        ("Open the Incident page to approve it (a real failover) or dismiss it.",),
        _page(proposal_id),
        {
            "proposal_id": proposal_id,
            "alertname": alertname,
            "detected_at": detected_at.isoformat(),
        },
    )


def proposal_withdrawn(plan: str, proposal_id: str, alertname: str) -> Notice:
    return Notice(
        EventKind.PROPOSAL_WITHDRAWN,
        plan,
        f"{plan}: proposed incident withdrawn (alert {alertname} resolved)",
        (f"every alert of proposal {proposal_id} resolved before anyone approved it",),
        Severity.INFO,
        (),
        _page(proposal_id),
        {"proposal_id": proposal_id, "alertname": alertname},
    )


__all__ = ["incident_proposed", "proposal_withdrawn"]
