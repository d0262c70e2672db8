"""Who may act: every action of the dashboard that reaches a real system asks here first.

Running the readiness checks (canary writes into the DR buckets, the TSIG-signed DNS
probe, secret reads, a stored snapshot), checking the way back live, exporting a signed
evidence pack, declaring, failing back and cancelling all need the operator role: a
signed-in operator (anyone, in lab mode). Public read shows, and nothing more.

The check is made where the click is handled, on the server, whatever the page showed:
a widget trigger sent over the websocket by a client that never saw the control is
refused the same way. Every request is audited, accepted or refused.
"""

from __future__ import annotations

import logging
from typing import Any

import streamlit as st

from ui import data
from ui.auth import Access
from ui.settings import UISettings

log = logging.getLogger("drills.ui.guard")

READINESS_ACTION = data.READINESS_ACTION


def actor(access: Access) -> str:
    """The name the audit log gives whoever acts."""
    if access.user:
        return access.user
    return "anonymous (lab mode)" if access.method == "lab" else "anonymous"


def allowed(
    settings: UISettings,
    access: Access,
    *,
    action: str,
    plan: str,
    what: str,
    detail: dict[str, Any] | None = None,
) -> bool:
    """Whether ``access`` may do ``action`` on ``plan``. A refusal is audited, logged and
    said on the page (``what`` names the action for people); the caller audits what it
    then does, since only it knows how that went."""
    if access.can_declare:
        return True
    why = f"refused: {what} needs the operator role; {access.why_not}"
    data.store(settings).audit(
        who=actor(access), action=action, plan=plan, accepted=False,
        reason=f"{what} from the dashboard", detail={**(detail or {}), "outcome": why},
    )  # fmt: skip
    log.warning("%s on %s by %s: %s", action, plan, actor(access), why)
    st.error(
        f"Not done: {what} needs the operator role — {access.why_not}.", icon=":material/lock:"
    )
    return False


def accepted(
    settings: UISettings,
    access: Access,
    *,
    action: str,
    plan: str,
    what: str,
    outcome: str,
    detail: dict[str, Any] | None = None,
) -> None:
    """Audit an action the operator role allowed, with what came of it."""
    data.store(settings).audit(
        who=actor(access), action=action, plan=plan, accepted=True,
        reason=f"{what} from the dashboard", detail={**(detail or {}), "outcome": outcome},
    )  # fmt: skip
    log.info("%s on %s by %s: %s", action, plan, actor(access), outcome)
