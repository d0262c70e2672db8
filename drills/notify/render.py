"""A notice as a message: title and body, the same for chat and mail.

The body names the plan, says what changed and what to do, and links the dashboard
page (``DRILLS_UI_URL``). Text that came from outside (check summaries, an operator's
reason) has its control characters escaped: a message must not repaint a terminal that
shows it.
"""

from __future__ import annotations

import os

from drills.notify.events import Notice
from drills.text import for_terminal

UI_URL_ENV = "DRILLS_UI_URL"
MAX_LINES = 40  # a chat message, not a report: the rest is on the dashboard


def dashboard_link(page: str, ui_url: str | None = None) -> str | None:
    """The dashboard page's address under ``DRILLS_UI_URL``, or None when it is not set."""
    base = (ui_url if ui_url is not None else os.environ.get(UI_URL_ENV, "")).strip()
    if not base:
        return None
    return f"{base.rstrip('/')}/{page}"


def _bullets(lines: tuple[str, ...]) -> list[str]:
    shown = [f"- {for_terminal(line)}" for line in lines[:MAX_LINES]]
    if len(lines) > MAX_LINES:
        shown.append(f"- … and {len(lines) - MAX_LINES} more (see the dashboard)")
    return shown


def render(notice: Notice, ui_url: str | None = None) -> tuple[str, str]:
    """``(title, body)`` of the message for ``notice``."""
    body = [f"Plan: {for_terminal(notice.plan)}", "", "What changed:", *_bullets(notice.changed)]
    if notice.remediation:
        body += ["", "Remediation:", *_bullets(notice.remediation)]
    link = dashboard_link(notice.page, ui_url)
    body += ["", f"Dashboard: {link}" if link else "Dashboard: set DRILLS_UI_URL for a link"]
    return f"[drills] {for_terminal(notice.title)}", "\n".join(body)
