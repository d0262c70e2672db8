"""The Incident page's proposed incidents: held there, with their alerts and ``startsAt``,
until an operator approves one (a real failover, declared as the page's own form declares
one, with ``detected_at`` the alerts' earliest ``startsAt``) or dismisses it. A proposal
whose alerts resolved first is shown withdrawn. Nothing here starts on its own."""

from __future__ import annotations

import getpass
from collections.abc import Callable
from typing import Any

import streamlit as st

from drills.store import (
    PROPOSAL_DECIDED_STATES,
    PROPOSAL_PENDING,
    PROPOSAL_RESOLVED,
    Proposal,
    proposal_listing,
)
from drills.takeover import (
    APPROVE_ACTION,
    DISMISS_ACTION,
    Declaration,
    ProposalApproval,
    dismiss_proposal,
)
from drills.text import for_markdown
from ui import components, data, guard, launches
from ui.auth import Access
from ui.data import PlanEntry
from ui.settings import UISettings

KEY = "declare.proposal"
APPROVE_BUTTON = "Approve and start the failover"
DISMISS_BUTTON = "Dismiss"

# Who approved started a run the page then watches: (flow run id, plan, T0, operator).
Follow = Callable[[str, str, Any, str], None]


@st.cache_data(ttl=data.SHORT, show_spinner=False)
def _listing(db_url: str, states: tuple[str, ...], limit: int) -> list[Proposal]:
    return proposal_listing(data._store(db_url), states, limit)


def approve(
    settings: UISettings, entry: PlanEntry, proposal_id: str, *, operator: str, reason: str,
    confirmation: str, declared_at: Any,
) -> Declaration:  # fmt: skip
    """Hand the approval to drills.takeover.proposals, through the launcher, which declares
    the incident."""
    approval = ProposalApproval(
        proposal_id=proposal_id, plan_path=entry.path, operator=operator, reason=reason,
        confirmation=confirmation, declared_at=declared_at,
    )  # fmt: skip
    return launches.approve(settings, approval)


def _alerts(found: Proposal) -> None:
    for alert in found.alerts:
        state = "resolved" if alert["status"] == PROPOSAL_RESOLVED else "firing"
        labels = ", ".join(f"{k}={v}" for k, v in sorted(alert["labels"].items()))
        summary = alert["annotations"].get("summary") or alert["annotations"].get("description")
        line = (
            f"- **{for_markdown(alert['alertname'])}** {state} since "
            f"{components.when(alert['starts_at'])} — `{for_markdown(labels)}`"
        )
        st.markdown(line + (f"\n  {for_markdown(summary)}" if summary else ""))


def _pending(
    settings: UISettings, access: Access, found: Proposal, entry: PlanEntry | None,
    busy: str | None, follow: Follow,
) -> None:  # fmt: skip
    with st.container(border=True, key=f"{KEY}.{found.id}"):
        st.subheader(f"Proposed incident on {found.plan}")
        st.markdown(
            f"Detected **{components.when(found.detected_at)}** (the alert's `startsAt`), "
            f"proposed {components.when(found.created_at)}. Nothing has been started: "
            "approving declares the incident, a **real failover**, with this detection time."
        )
        _alerts(found)
        if found.outcome:
            st.caption(f"Last attempt: {for_markdown(found.outcome)}")
        if not access.can_declare:
            st.info(f"Only an operator may approve it: {access.why_not}.", icon=":material/lock:")
            return
        if entry is None:
            st.warning(f"No valid plan named {found.plan} is configured here (DRILLS_PLANS).")
            return
        _decide(settings, access, found, entry, busy, follow)


def _decide(
    settings: UISettings, access: Access, found: Proposal, entry: PlanEntry,
    busy: str | None, follow: Follow,
) -> None:  # fmt: skip
    key, off = f"{KEY}.{found.id}", busy is not None
    if busy:
        st.info(f"Approving is off while {busy}.", icon=":material/hourglass_top:")
    first = found.alerts[0]["alertname"] if found.alerts else "?"
    operator = access.user or st.text_input(
        "Your name", value=getpass.getuser(), key=f"{key}.operator", disabled=off
    )
    reason = st.text_area(
        "Reason", key=f"{key}.reason", disabled=off,
        value=f"alert {first} firing since {found.detected_at.isoformat(timespec='seconds')}",
    )  # fmt: skip
    confirmation = st.text_input(
        f"Type the plan name **{found.plan}** to confirm", key=f"{key}.confirm", disabled=off
    )
    approve_col, dismiss_col = st.columns(2)
    if approve_col.button(APPROVE_BUTTON, key=f"{key}.approve", type="primary", disabled=off):
        if not guard.allowed(settings, access, action=APPROVE_ACTION, plan=found.plan,
                             what="approving a proposed incident"):  # fmt: skip
            return
        declared_at = components.now()  # T0 is the click, as for a declaration
        decision = approve(settings, entry, found.id, operator=operator, reason=reason,
                           confirmation=confirmation, declared_at=declared_at)  # fmt: skip
        if decision.accepted and decision.flow_run_id:
            follow(decision.flow_run_id, found.plan, declared_at, operator)
            st.rerun()
        st.error(f"Incident **not** declared — {decision.message}", icon=":material/block:")
    if dismiss_col.button(DISMISS_BUTTON, key=f"{key}.dismiss", disabled=off):
        if not guard.allowed(settings, access, action=DISMISS_ACTION, plan=found.plan,
                             what="dismissing a proposed incident"):  # fmt: skip
            return
        why = dismiss_proposal(data.store(settings), found.id, who=operator, reason=reason,
                                now=components.now())  # fmt: skip
        data.clear_caches()
        if why is None:
            st.rerun()
        st.error(f"Not dismissed — {why}", icon=":material/block:")


def _decided(rows: list[Proposal]) -> None:
    with st.expander(f"Proposals decided: the last {len(rows)}", expanded=False):
        if not rows:
            st.caption("None yet.")
            return
        st.dataframe(
            [
                {
                    "plan": p.plan,
                    "state": p.state,
                    "alert": ", ".join(sorted({a["alertname"] for a in p.alerts})),
                    "detected (startsAt)": components.when(p.detected_at),
                    "decided": components.when(p.decided_at),
                    "by": p.decided_by or "",
                    "outcome": p.outcome,
                }
                for p in rows
            ],
            hide_index=True,
        )


def section(
    settings: UISettings, access: Access, entries: list[PlanEntry], busy: str | None,
    follow: Follow,
) -> None:  # fmt: skip
    """Pending proposals (the one in ``?proposal=`` first), then those decided."""
    pending = _listing(settings.db_url, (PROPOSAL_PENDING,), 20)
    decided = _listing(settings.db_url, PROPOSAL_DECIDED_STATES, 10)
    if not pending and not decided:
        return
    st.header("Proposed incidents")
    if not pending:
        st.caption("No alert proposes an incident now.")
    wanted = st.query_params.get("proposal")
    by_name = {e.name: e for e in entries if e.valid}
    for found in sorted(pending, key=lambda p: p.id != wanted):
        _pending(settings, access, found, by_name.get(found.plan), busy, follow)
    shown = next((p for p in decided if p.id == wanted), None)
    if shown is not None:
        st.info(f"The proposal linked here is **{shown.state}**: {for_markdown(shown.outcome)}")
    _decided(decided)


__all__ = ["APPROVE_BUTTON", "DISMISS_BUTTON", "approve", "section"]
